/*
 * The English analysis components the minimal (integ-test) distribution lacks, as a *stable* analysis
 * plugin: compiled against the distribution's own lib/*.jar (lucene-analysis-common and the stable plugin
 * API ship there), so nothing is downloaded. A full Elasticsearch has all of these in its analysis-common
 * module and needs none of this.
 *
 * Every component is built with EMPTY settings on each index creation (Elasticsearch validates them
 * eagerly): each one must accept that and fall back to the documented default.
 */
package org.hybridsearch.analysis;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.en.EnglishMinimalStemFilter;
import org.apache.lucene.analysis.en.EnglishPossessiveFilter;
import org.apache.lucene.analysis.en.KStemFilter;
import org.apache.lucene.analysis.en.PorterStemFilter;
import org.apache.lucene.analysis.email.UAX29URLEmailTokenizer;
import org.apache.lucene.analysis.miscellaneous.ASCIIFoldingFilter;
import org.apache.lucene.analysis.miscellaneous.RemoveDuplicatesTokenFilter;
import org.apache.lucene.analysis.pattern.PatternCaptureGroupTokenFilter;
import org.apache.lucene.analysis.snowball.SnowballFilter;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.AnalyzerFactory;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.analysis.TokenizerFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.BooleanSetting;
import org.elasticsearch.plugin.settings.IntSetting;
import org.elasticsearch.plugin.settings.ListSetting;
import org.elasticsearch.plugin.settings.StringSetting;
import org.tartarus.snowball.ext.EnglishStemmer;

import java.io.IOException;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Pattern;

public final class EnglishAnalysis {
    private EnglishAnalysis() {}

    /** The `english` analyzer: Lucene's EnglishAnalyzer, the class behind Elasticsearch's built-in one
     * (standard tokenizer, possessive filter, lowercase, English stopwords, Porter stemmer). */
    @NamedComponent("english")
    public static final class English implements AnalyzerFactory {
        @Override
        public Analyzer create() {
            return new EnglishAnalyzer();
        }
    }

    @NamedComponent("porter_stem")
    public static final class PorterStem implements TokenFilterFactory {
        @Override
        public TokenStream create(TokenStream in) {
            return new PorterStemFilter(in);
        }
    }

    @NamedComponent("kstem")
    public static final class KStem implements TokenFilterFactory {
        @Override
        public TokenStream create(TokenStream in) {
            return new KStemFilter(in);
        }
    }

    @AnalysisSettings
    public interface LanguageSettings {
        @StringSetting(path = "language", defaultValue = "")
        String language();

        @StringSetting(path = "name", defaultValue = "")
        String name();
    }

    /** `stemmer` with the English languages of Elasticsearch's filter of that name (default: english). */
    @NamedComponent("stemmer")
    public static final class Stemmer implements TokenFilterFactory {
        static final Set<String> LANGUAGES = Set.of(
            "english", "porter", "light_english", "kstem", "minimal_english", "possessive_english", "porter2"
        );
        private final String language;

        @Inject
        public Stemmer(LanguageSettings settings) {
            String chosen = settings.language().isEmpty() ? settings.name() : settings.language();
            this.language = (chosen.isEmpty() ? "english" : chosen).toLowerCase(Locale.ROOT);
            if (!LANGUAGES.contains(language)) { // an unknown language fails when the index is created
                throw new IllegalArgumentException(
                    "stemmer language [" + language + "] is not available here; use one of " + LANGUAGES
                        + " (a full Elasticsearch has them all)"
                );
            }
        }

        @Override
        public TokenStream create(TokenStream in) {
            switch (language) {
                case "english":
                case "porter":
                    return new PorterStemFilter(in);
                case "light_english":
                case "kstem":
                    return new KStemFilter(in);
                case "minimal_english":
                    return new EnglishMinimalStemFilter(in);
                case "possessive_english":
                    return new EnglishPossessiveFilter(in);
                case "porter2":
                    return new SnowballFilter(in, new EnglishStemmer());
                default:
                    throw new IllegalStateException("unreachable: " + language);
            }
        }
    }

    /** `snowball` (default language English). */
    @NamedComponent("snowball")
    public static final class Snowball implements TokenFilterFactory {
        private final String language;

        @Inject
        public Snowball(LanguageSettings settings) {
            this.language = settings.language().isEmpty() ? "English" : settings.language();
        }

        @Override
        public TokenStream create(TokenStream in) {
            if (language.equalsIgnoreCase("english")) {
                return new SnowballFilter(in, new EnglishStemmer());
            }
            return new SnowballFilter(in, language);
        }
    }

    @AnalysisSettings
    public interface PreserveOriginalSettings {
        @BooleanSetting(path = "preserve_original", defaultValue = false)
        boolean preserveOriginal();
    }

    @NamedComponent("asciifolding")
    public static final class AsciiFolding implements TokenFilterFactory {
        private final boolean preserveOriginal;

        @Inject
        public AsciiFolding(PreserveOriginalSettings settings) {
            this.preserveOriginal = settings.preserveOriginal();
        }

        @Override
        public TokenStream create(TokenStream in) {
            return new ASCIIFoldingFilter(in, preserveOriginal);
        }

        @Override
        public TokenStream normalize(TokenStream in) {
            return new ASCIIFoldingFilter(in, false);
        }
    }

    @AnalysisSettings
    public interface PatternCaptureSettings {
        @ListSetting(path = "patterns")
        List<String> patterns();

        @BooleanSetting(path = "preserve_original", defaultValue = true)
        boolean preserveOriginal();
    }

    /** `pattern_capture` (the `.security` index's `email` analyzer uses it). No patterns: tokens pass through. */
    @NamedComponent("pattern_capture")
    public static final class PatternCapture implements TokenFilterFactory {
        private final Pattern[] patterns;
        private final boolean preserveOriginal;

        @Inject
        public PatternCapture(PatternCaptureSettings settings) {
            List<String> sources = settings.patterns();
            this.patterns = sources == null
                ? new Pattern[0]
                : sources.stream().map(Pattern::compile).toArray(Pattern[]::new);
            this.preserveOriginal = settings.preserveOriginal();
        }

        @Override
        public TokenStream create(TokenStream in) {
            return patterns.length == 0 ? in : new PatternCaptureGroupTokenFilter(in, preserveOriginal, patterns);
        }
    }

    @AnalysisSettings
    public interface UniqueSettings {
        @BooleanSetting(path = "only_on_same_position", defaultValue = false)
        boolean onlyOnSamePosition();
    }

    /** `unique`: drops a token already seen in the stream (or, with only_on_same_position, at the same position). */
    @NamedComponent("unique")
    public static final class Unique implements TokenFilterFactory {
        private final boolean onlyOnSamePosition;

        @Inject
        public Unique(UniqueSettings settings) {
            this.onlyOnSamePosition = settings.onlyOnSamePosition();
        }

        @Override
        public TokenStream create(TokenStream in) {
            return onlyOnSamePosition ? new RemoveDuplicatesTokenFilter(in) : new UniqueTokenFilter(in);
        }
    }

    static final class UniqueTokenFilter extends TokenFilter {
        private final CharTermAttribute term = addAttribute(CharTermAttribute.class);
        private final CharArraySet seen = new CharArraySet(8, false);

        UniqueTokenFilter(TokenStream in) {
            super(in);
        }

        @Override
        public boolean incrementToken() throws IOException {
            while (input.incrementToken()) {
                if (!seen.contains(term.buffer(), 0, term.length())) {
                    seen.add(new String(term.buffer(), 0, term.length()));
                    return true;
                }
            }
            return false;
        }

        @Override
        public void reset() throws IOException {
            super.reset();
            seen.clear();
        }
    }

    @AnalysisSettings
    public interface MaxTokenLengthSettings {
        @IntSetting(path = "max_token_length", defaultValue = 255)
        int maxTokenLength();
    }

    /** `uax_url_email`: the standard tokenizer that keeps URLs and e-mail addresses whole. */
    @NamedComponent("uax_url_email")
    public static final class UaxUrlEmail implements TokenizerFactory {
        private final int maxTokenLength;

        @Inject
        public UaxUrlEmail(MaxTokenLengthSettings settings) {
            this.maxTokenLength = settings.maxTokenLength();
        }

        @Override
        public Tokenizer create() {
            UAX29URLEmailTokenizer tokenizer = new UAX29URLEmailTokenizer();
            tokenizer.setMaxTokenLength(maxTokenLength);
            return tokenizer;
        }
    }
}
