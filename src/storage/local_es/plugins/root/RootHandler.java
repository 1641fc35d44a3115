/*
 * `GET /` and `HEAD /` for the minimal (integ-test) distribution, which leaves out the rest-root module that
 * normally answers them: the usual name / cluster_name / cluster_uuid / version document. Clients call it
 * for `info()` / `ping()` (Haystack's document store does on start). A classic plugin: compiled against the
 * distribution's own jars for the exact server version. A full Elasticsearch needs none of this.
 *
 * Unlike rest-root, it answers any authenticated user (it calls no transport action, so no
 * `cluster:monitor/main` privilege is checked).
 */
package org.hybridsearch.root;

import org.apache.lucene.util.Version;
import org.elasticsearch.Build;
import org.elasticsearch.client.internal.node.NodeClient;
import org.elasticsearch.cluster.ClusterState;
import org.elasticsearch.cluster.service.ClusterService;
import org.elasticsearch.rest.BaseRestHandler;
import org.elasticsearch.rest.RestRequest;
import org.elasticsearch.rest.RestResponse;
import org.elasticsearch.rest.RestStatus;
import org.elasticsearch.xcontent.XContentBuilder;

import java.util.List;
import java.util.function.Supplier;

/** The `GET /` document, as rest-root writes it. */
final class RootHandler extends BaseRestHandler {
    private final Supplier<ClusterService> clusterService;

    RootHandler(Supplier<ClusterService> clusterService) {
        this.clusterService = clusterService;
    }

    @Override
    public String getName() {
        return "hybrid_search_root";
    }

    @Override
    public List<Route> routes() {
        return List.of(new Route(RestRequest.Method.GET, "/"), new Route(RestRequest.Method.HEAD, "/"));
    }

    @Override
    protected RestChannelConsumer prepareRequest(RestRequest request, NodeClient client) {
        return channel -> {
            ClusterService service = clusterService.get();
            ClusterState state = service.state();
            Build build = Build.current();
            XContentBuilder body = channel.newBuilder();
            body.startObject();
            body.field("name", service.localNode().getName());
            body.field("cluster_name", service.getClusterName().value());
            body.field("cluster_uuid", state.metadata().clusterUUID());
            body.startObject("version");
            body.field("number", build.qualifiedVersion());
            body.field("build_flavor", build.flavor());
            body.field("build_type", build.type().displayName());
            body.field("build_hash", build.hash());
            body.field("build_date", build.date());
            body.field("build_snapshot", build.isSnapshot());
            body.field("lucene_version", Version.LATEST.toString());
            body.field("minimum_wire_compatibility_version", build.minWireCompatVersion());
            body.field("minimum_index_compatibility_version", build.minIndexCompatVersion());
            body.endObject();
            body.field("tagline", "You Know, for Search");
            body.endObject();
            channel.sendResponse(new RestResponse(RestStatus.OK, body));
        };
    }
}
