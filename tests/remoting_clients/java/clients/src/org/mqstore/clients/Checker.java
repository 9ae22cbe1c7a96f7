package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Compares every received message field by field with what was sent: topic, body, tags, keys,
 * user properties (no more, no fewer than sent), message id, queue and queue offset when the
 * send reported them.  Thread-safe: push consumers call {@link #receive} from many threads.
 */
final class Checker {
    private static final int SAMPLES_MAX = 20;

    private final Map<Integer, Sent> expected = new ConcurrentHashMap<>();
    private final Map<Integer, AtomicInteger> receivedCounts = new ConcurrentHashMap<>();
    private final List<String> mismatches = Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger mismatchCount = new AtomicInteger();
    private final AtomicInteger unexpectedCount = new AtomicInteger();
    private final AtomicInteger receivedTotal = new AtomicInteger();
    private volatile int ignoredFrom = Integer.MAX_VALUE;
    private final Object deferLock = new Object();
    private List<MessageExt> deferred = null;

    /**
     * Holds received messages unchecked until {@link #release}: for consumers that run while
     * the producer is still learning what it sent (message ids, queue offsets).
     */
    void defer() {
        synchronized (deferLock) {
            deferred = new ArrayList<>();
        }
    }

    void release() {
        List<MessageExt> held;
        synchronized (deferLock) {
            held = deferred;
            deferred = null;
        }
        for (MessageExt message : held) {
            check(message);
        }
    }

    /** Messages with this index and above are warm-ups (they create the topic): not checked. */
    void ignoreFrom(int index) {
        ignoredFrom = index;
    }

    void expect(Sent sent) {
        expected.put(sent.index, sent);
    }

    void expectAll(Collection<Sent> sent, Set<String> acceptedTags) {
        for (Sent one : sent) {
            if (acceptedTags == null || acceptedTags.contains(one.message.getTags())) {
                expect(one);
            }
        }
    }

    int expectedCount() {
        return expected.size();
    }

    /** Every expected message arrived at least once. */
    boolean complete() {
        return receivedCounts.keySet().containsAll(expected.keySet());
    }

    void mismatch(String what) {
        mismatchCount.incrementAndGet();
        if (mismatches.size() < SAMPLES_MAX) {
            mismatches.add(what);
        }
    }

    /** Checks one received message; false if it was a warm-up, not one under test. */
    boolean receive(MessageExt received) {
        String indexText = received.getUserProperty(Corpus.INDEX_PROPERTY);
        if (indexText != null && Integer.parseInt(indexText) >= ignoredFrom) {
            return false;
        }
        synchronized (deferLock) {
            if (deferred != null) {
                deferred.add(received);
                return true;
            }
        }
        check(received);
        return true;
    }

    private void check(MessageExt received) {
        String indexText = received.getUserProperty(Corpus.INDEX_PROPERTY);
        receivedTotal.incrementAndGet();
        Sent sent = indexText == null ? null : expected.get(Integer.parseInt(indexText));
        if (sent == null) {
            unexpectedCount.incrementAndGet();
            return;
        }
        receivedCounts.computeIfAbsent(sent.index, k -> new AtomicInteger()).incrementAndGet();
        compare(sent, received);
    }

    private void compare(Sent sent, MessageExt received) {
        String at = "message " + sent.index + ": ";
        check(at + "topic", sent.message.getTopic(), received.getTopic());
        if (!Arrays.equals(sent.message.getBody(), received.getBody())) {
            mismatch(at + "body differs (" + received.getBody().length + " bytes received, "
                + sent.message.getBody().length + " sent)");
        }
        check(at + "tags", sent.message.getTags(), received.getTags());
        check(at + "keys", sent.message.getKeys(), received.getKeys());
        check(at + "msgId", sent.msgId, MessageClientIDSetter.getUniqID(received));
        if (sent.queueId >= 0) {
            check(at + "queueId", sent.queueId, received.getQueueId());
        }
        if (sent.queueOffset >= 0) {
            check(at + "queueOffset", sent.queueOffset, received.getQueueOffset());
        }
        Map<String, String> sentProperties = userProperties(sent.message.getProperties());
        Map<String, String> gotProperties = userProperties(received.getProperties());
        check(at + "user properties", sentProperties, gotProperties);
    }

    private static Map<String, String> userProperties(Map<String, String> all) {
        Map<String, String> user = new TreeMap<>();
        for (Map.Entry<String, String> entry : all.entrySet()) {
            if (!MessageConst.STRING_HASH_SET.contains(entry.getKey())) {
                user.put(entry.getKey(), entry.getValue());
            }
        }
        return user;
    }

    private void check(String what, Object sent, Object received) {
        if (sent == null ? received != null : !sent.equals(received)) {
            mismatch(what + ": sent " + sent + ", received " + received);
        }
    }

    /** The verdict fields every scenario's JSON line carries. */
    void report(Map<String, Object> out) {
        List<Integer> missing = new ArrayList<>();
        int duplicates = 0;
        for (Integer index : new TreeMap<>(expected).keySet()) {
            AtomicInteger count = receivedCounts.get(index);
            if (count == null) {
                missing.add(index);
            } else {
                duplicates += count.get() - 1;
            }
        }
        out.put("expected", expected.size());
        out.put("received", receivedTotal.get());
        out.put("missingCount", missing.size());
        out.put("missing", missing.subList(0, Math.min(SAMPLES_MAX, missing.size())));
        out.put("duplicates", duplicates);
        out.put("unexpected", unexpectedCount.get());
        out.put("mismatchCount", mismatchCount.get());
        out.put("mismatches", new ArrayList<>(mismatches));
        out.put("ok", missing.isEmpty() && duplicates == 0 && unexpectedCount.get() == 0
            && mismatchCount.get() == 0 && !expected.isEmpty());
    }
}
