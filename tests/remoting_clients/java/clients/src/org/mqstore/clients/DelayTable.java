package org.mqstore.clients;

import java.util.ArrayList;
import java.util.List;

/**
 * A delay-level table in the syntax of RocketMQ's broker setting {@code messageDelayLevel}
 * ("1s 5s 10s 30s 1m ... 2h"): items split on spaces, item {@code i} is level {@code i + 1},
 * its last character the unit (s, m, h, d).  The scenarios get the table the broker under test
 * runs with ({@code --delay-levels}, tests/remoting_clients/delay_levels.py), so they know how
 * long each level must wait.
 */
final class DelayTable {
    private final long[] millis;

    DelayTable(String text) {
        List<Long> parsed = new ArrayList<>();
        for (String item : text.trim().split(" +")) {
            long unit;
            switch (item.charAt(item.length() - 1)) {
                case 's':
                    unit = 1000L;
                    break;
                case 'm':
                    unit = 60_000L;
                    break;
                case 'h':
                    unit = 3_600_000L;
                    break;
                case 'd':
                    unit = 86_400_000L;
                    break;
                default:
                    throw new IllegalArgumentException("delay level " + item + ": unit not s/m/h/d");
            }
            parsed.add(Long.parseLong(item.substring(0, item.length() - 1)) * unit);
        }
        millis = new long[parsed.size()];
        for (int i = 0; i < millis.length; i++) {
            millis[i] = parsed.get(i);
        }
    }

    int maxLevel() {
        return millis.length;
    }

    /** The wait of {@code level}; a level above the table's last is clamped to it, as the
     *  broker does. */
    long millis(int level) {
        if (level < 1) {
            throw new IllegalArgumentException("delay level " + level + " < 1");
        }
        return millis[Math.min(level, millis.length) - 1];
    }
}
