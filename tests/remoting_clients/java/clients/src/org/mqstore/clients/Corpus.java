package org.mqstore.clients;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.common.message.Message;

/**
 * The messages every scenario sends: message {@code i} is a pure function of the topic and
 * {@code i}, so a receiver can tell exactly what was sent without sharing state.
 *
 * <p>Bodies are binary (every byte value appears), tags cycle through three values, each message
 * has two keys (one unique, one shared by a seventh of the messages) and three user properties,
 * one of them non-ASCII.
 */
final class Corpus {
    static final String INDEX_PROPERTY = "idx";
    static final String[] TAGS = {"TagA", "TagB", "TagC"};
    static final String KEY_GROUPS_PROPERTY = "keyGroups";
    static final int KEY_GROUPS = 7;

    final String topic;
    final int bodyBytes;

    Corpus(String topic, int bodyBytes) {
        if (bodyBytes < 16) {
            throw new IllegalArgumentException("bodies need at least 16 bytes, got " + bodyBytes);
        }
        this.topic = topic;
        this.bodyBytes = bodyBytes;
    }

    static String tag(int index) {
        return TAGS[index % TAGS.length];
    }

    static String uniqueKey(String topic, int index) {
        return topic + "-key-" + index;
    }

    static String groupKey(String topic, int index) {
        return topic + "-group-" + (index % KEY_GROUPS);
    }

    byte[] body(int index) {
        byte[] body = new byte[bodyBytes];
        byte[] prefix = ("#" + index + "#").getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < bodyBytes; i++) {
            body[i] = (byte) (index * 31 + i * 7);
        }
        System.arraycopy(prefix, 0, body, 0, Math.min(prefix.length, bodyBytes));
        return body;
    }

    /** The user properties of message {@code index}, in the order they are set. */
    Map<String, String> properties(int index) {
        Map<String, String> properties = new LinkedHashMap<>();
        properties.put(INDEX_PROPERTY, Integer.toString(index));
        properties.put("color", index % 2 == 0 ? "red" : "gr\u00fcn \u20ac");
        properties.put("note", "a b=c;d:" + (index * 13));
        return properties;
    }

    Message message(int index) {
        Message message = new Message(topic, tag(index), body(index));
        message.setKeys(Arrays.asList(uniqueKey(topic, index), groupKey(topic, index)));
        for (Map.Entry<String, String> property : properties(index).entrySet()) {
            message.putUserProperty(property.getKey(), property.getValue());
        }
        return message;
    }

    /** The tags a subscription expression ("*", "TagA || TagB") accepts; null means all. */
    static Set<String> acceptedTags(String expression) {
        if (expression.trim().equals("*")) {
            return null;
        }
        Set<String> tags = new HashSet<>();
        for (String tag : expression.split("\\|\\|")) {
            tags.add(tag.trim());
        }
        return tags;
    }
}
