/*
 * The plugin's parts every server version shares: the cluster service it reads `GET /` from. The REST
 * registration, whose signature changed in 8.13, is in `api-<first version>/RootPlugin.java` (the launcher
 * compiles the newest one not newer than the server).
 */
package org.hybridsearch.root;

import org.elasticsearch.cluster.service.ClusterService;
import org.elasticsearch.plugins.ActionPlugin;
import org.elasticsearch.plugins.Plugin;

import java.util.Collection;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

abstract class RootBase extends Plugin implements ActionPlugin {
    private final AtomicReference<ClusterService> clusterService = new AtomicReference<>();

    @Override
    public Collection<?> createComponents(PluginServices services) {
        clusterService.set(services.clusterService());
        return List.of();
    }

    final RootHandler handler() {
        return new RootHandler(clusterService::get);
    }
}
