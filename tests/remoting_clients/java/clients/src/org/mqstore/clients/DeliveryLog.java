package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Every delivery of each corpus message to a push consumer's listener, with the time it came,
 * and the checks on them.  Round {@code r} is the delivery with reconsumeTimes {@code r}; each
 * round has its own {@link Checker}, so each message must come exactly once per round, with its
 * body, tags, keys, user properties and message id, in the original topic (the client restores
 * it from RETRY_TOPIC).  Round 0 must also be in the queue and at the offset the send reported;
 * later rounds come from a queue of %RETRY%&lt;group&gt;.  Thread-safe.
 */
final class DeliveryLog {
    /** The broker's delay level for a send-back whose delayLevel is 0: 3 + reconsumeTimes. */
    static final int FIRST_RETRY_LEVEL = 3;

    static final class Delivery {
        final long atMs;
        final int reconsumeTimes;
        final String topic;
        final int queueId;
        final String retryTopic;
        final String originMessageId;
        final String offsetMsgId;

        Delivery(long atMs, MessageExt message) {
            this.atMs = atMs;
            this.reconsumeTimes = message.getReconsumeTimes();
            this.topic = message.getTopic();
            this.queueId = message.getQueueId();
            this.retryTopic = message.getProperty(MessageConst.PROPERTY_RETRY_TOPIC);
            this.originMessageId = message.getProperty(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID);
            this.offsetMsgId = offsetMsgId(message);
        }
    }

    final List<Checker> rounds = new ArrayList<>();
    private final Map<Integer, List<Delivery>> byIndex = new ConcurrentHashMap<>();
    private final AtomicInteger strangers = new AtomicInteger();
    private volatile long lastMs;

    DeliveryLog(int roundCount) {
        for (int r = 0; r < roundCount; r++) {
            rounds.add(new Checker());
        }
    }

    /** The store id (host and commit-log offset) of a received message, as the client read it. */
    static String offsetMsgId(MessageExt message) {
        return message instanceof MessageClientExt
            ? ((MessageClientExt) message).getOffsetMsgId() : message.getMsgId();
    }

    /** The same message, expected in any queue (retry and dead-letter queues are the broker's). */
    static Sent anyQueue(Sent sent) {
        return new Sent(sent.index, sent.message, sent.msgId, sent.offsetMsgId, -1, -1);
    }

    void expect(List<Sent> sent) {
        for (Sent one : sent) {
            rounds.get(0).expect(one);
            for (int r = 1; r < rounds.size(); r++) {
                rounds.get(r).expect(anyQueue(one));
            }
        }
    }

    void record(MessageExt message) {
        long now = System.currentTimeMillis();
        String indexText = message.getUserProperty(Corpus.INDEX_PROPERTY);
        if (indexText == null) {
            strangers.incrementAndGet();
            return;
        }
        int round = message.getReconsumeTimes();
        if (round >= 0 && round < rounds.size()) {
            rounds.get(round).receive(message);
        }
        lastMs = now;
        byIndex.computeIfAbsent(Integer.parseInt(indexText),
            k -> Collections.synchronizedList(new ArrayList<>())).add(new Delivery(now, message));
    }

    /** Every message 0..count-1 came once per round (or more often). */
    boolean complete(int count) {
        for (int i = 0; i < count; i++) {
            List<Delivery> deliveries = byIndex.get(i);
            if (deliveries == null || deliveries.size() < rounds.size()) {
                return false;
            }
        }
        return true;
    }

    long lastMs() {
        return lastMs;
    }

    int strangers() {
        return strangers.get();
    }

    List<Delivery> deliveries(int index) {
        List<Delivery> list = byIndex.get(index);
        List<Delivery> copy = list == null ? new ArrayList<>() : new ArrayList<>(list);
        copy.sort(Comparator.comparingLong(d -> d.atMs));
        return copy;
    }

    /**
     * One message's deliveries as a JSON map, each difference from what RocketMQ does added
     * to {@code problems}: reconsumeTimes 0, 1, ... once each; delivery {@code k} after level
     * 3 + k - 1's wait (within [-earlyMs, +lateMs]); the original topic every time; from the
     * second delivery on, RETRY_TOPIC = that topic and ORIGIN_MESSAGE_ID = the store id of the
     * first delivery (what the broker sets on a send-back).
     */
    Map<String, Object> judge(Sent sent, DelayTable table, long earlyMs, long lateMs,
                              List<String> problems) {
        List<Delivery> list = deliveries(sent.index);
        String at = "message " + sent.index + ": ";
        List<Object> reconsume = new ArrayList<>();
        List<Object> topics = new ArrayList<>();
        List<Object> retryTopics = new ArrayList<>();
        List<Object> origins = new ArrayList<>();
        List<Object> delays = new ArrayList<>();
        List<Object> expectedDelays = new ArrayList<>();
        List<Object> expectedReconsume = new ArrayList<>();
        for (int r = 0; r < rounds.size(); r++) {
            expectedReconsume.add(r);
        }
        String firstId = list.isEmpty() ? null : list.get(0).offsetMsgId;
        for (int k = 0; k < list.size(); k++) {
            Delivery delivery = list.get(k);
            reconsume.add(delivery.reconsumeTimes);
            topics.add(delivery.topic);
            retryTopics.add(delivery.retryTopic);
            origins.add(delivery.originMessageId);
            if (!sent.message.getTopic().equals(delivery.topic)) {
                problems.add(at + "delivery " + k + " in topic " + delivery.topic);
            }
            if (k == 0) {
                continue;
            }
            long delay = delivery.atMs - list.get(k - 1).atMs;
            long want = table.millis(FIRST_RETRY_LEVEL + k - 1);
            delays.add(delay);
            expectedDelays.add(want);
            if (delay < want - earlyMs || delay > want + lateMs) {
                problems.add(at + "delivery " + k + " came " + delay + " ms after the one before,"
                    + " expected " + want + " ms (-" + earlyMs + "/+" + lateMs + ")");
            }
            if (!sent.message.getTopic().equals(delivery.retryTopic)) {
                problems.add(at + "delivery " + k + " has RETRY_TOPIC " + delivery.retryTopic);
            }
            if (firstId == null || !firstId.equals(delivery.originMessageId)) {
                problems.add(at + "delivery " + k + " has ORIGIN_MESSAGE_ID "
                    + delivery.originMessageId + ", the first delivery's id is " + firstId);
            }
        }
        if (!reconsume.equals(expectedReconsume)) {
            problems.add(at + "reconsumeTimes " + reconsume + ", expected " + expectedReconsume);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("index", sent.index);
        out.put("key", Corpus.uniqueKey(sent.message.getTopic(), sent.index));
        out.put("sentOffsetMsgId", sent.offsetMsgId);
        out.put("firstOffsetMsgId", firstId);
        out.put("reconsumeTimes", reconsume);
        out.put("delaysMs", delays);
        out.put("expectedDelaysMs", expectedDelays);
        out.put("topics", topics);
        out.put("retryTopic", retryTopics);
        out.put("originMessageId", origins);
        return out;
    }
}
