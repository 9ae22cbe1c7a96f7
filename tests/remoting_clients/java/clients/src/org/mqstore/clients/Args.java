package org.mqstore.clients;

import java.util.HashMap;
import java.util.Map;

/** The subcommands' options: every option is {@code --name value}; unknown names are errors. */
final class Args {
    private final Map<String, String> values = new HashMap<>();
    private final Map<String, Boolean> used = new HashMap<>();

    Args(String[] argv, int from) {
        for (int i = from; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value, got " + argv[i]);
            }
            values.put(argv[i].substring(2), argv[i + 1]);
        }
    }

    String text(String name) {
        String value = values.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        used.put(name, true);
        return value;
    }

    String text(String name, String fallback) {
        used.put(name, true);
        return values.getOrDefault(name, fallback);
    }

    int integer(String name, int fallback) {
        return Integer.parseInt(text(name, Integer.toString(fallback)));
    }

    /** Options given but never read are typos: refuse them rather than ignore them. */
    void checkAllUsed() {
        for (String name : values.keySet()) {
            if (!used.containsKey(name)) {
                throw new IllegalArgumentException("unknown option --" + name);
            }
        }
    }
}
