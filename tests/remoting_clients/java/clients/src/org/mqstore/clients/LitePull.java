package org.mqstore.clients;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * DefaultLitePullConsumer in its three uses: subscribe (the client rebalances and commits),
 * assign (the caller picks queues) and seek (the caller picks offsets).
 */
final class LitePull {
    private static final long POLL_MS = 1000;
    /** After everything arrived, one more poll this long: a duplicate would show up in it. */
    private static final long TAIL_POLL_MS = 1000;
    private static final long ROUTE_RETRY_MS = 500;
    private static final int SEEK_RETRIES_MAX = 3;

    private LitePull() {
    }

    static void pollUntilComplete(DefaultLitePullConsumer consumer, Checker checker,
                                  long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!checker.complete() && System.currentTimeMillis() < deadline) {
            for (MessageExt message : consumer.poll(POLL_MS)) {
                checker.receive(message);
            }
        }
        for (MessageExt message : consumer.poll(TAIL_POLL_MS)) {
            checker.receive(message);
        }
    }

    /**
     * Assigns every queue of the topic and reads.  With {@code seekOffsets} empty, a new group
     * reads from the first offset (no seek).  Otherwise the group's committed offset of each
     * queue is first set to {@code endOffsets} (nothing left to read, see
     * {@link PullReadBack#commit}), then each queue is sought to its seek offset: assign starts
     * pulling before seek can run, and a pull in flight when seek lands can still hand over its
     * messages (seen with the 5.5.0 client: messages below the seek offset came back); from
     * the end, that pull finds nothing.
     */
    static Map<String, Object> readAssigned(String namesrv, String topic, String group,
                                            Map<Integer, Long> endOffsets,
                                            Map<Integer, Long> seekOffsets, Checker checker,
                                            long timeoutMs) throws Exception {
        if (!endOffsets.isEmpty()) {
            PullReadBack.commit(namesrv, topic, group, endOffsets, timeoutMs);
        }
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.setAutoCommit(false);
        consumer.start();
        Map<String, Object> out = new HashMap<>();
        try {
            List<MessageQueue> queues = awaitRoute(consumer, topic, timeoutMs);
            consumer.assign(queues);
            int seekRetries = 0;
            for (MessageQueue queue : queues) {
                Long offset = seekOffsets.get(queue.getQueueId());
                if (offset != null) {
                    seekRetries += seek(consumer, queue, offset);
                }
            }
            out.put("queues", queues.size());
            out.put("seekRetries", seekRetries);
            pollUntilComplete(consumer, checker, timeoutMs);
        } finally {
            consumer.shutdown();
        }
        return out;
    }

    /**
     * The topic's queues once the name server has its route.  A topic the broker created on
     * the first send reaches the name server with the broker's next registration: oneway sends
     * return before that, and the route may not be there yet when the read-back starts.
     */
    static List<MessageQueue> awaitRoute(DefaultLitePullConsumer consumer, String topic,
                                         long timeoutMs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            try {
                return new ArrayList<>(consumer.fetchMessageQueues(topic));
            } catch (MQClientException notYet) {
                if (System.currentTimeMillis() > deadline) {
                    throw notYet;
                }
                Thread.sleep(ROUTE_RETRY_MS);
            }
        }
    }

    /**
     * Seeks, retrying a few times; returns the number of retries, which result lines report.
     * Seek asks the broker for the queue's bounds, and the 5.5.0 client's first request on a
     * new connection has been seen to fail with "send request to ... failed" on a loaded
     * machine (RocketMQ itself was the server).
     */
    static int seek(DefaultLitePullConsumer consumer, MessageQueue queue, long offset)
        throws Exception {
        for (int retry = 0; ; retry++) {
            try {
                consumer.seek(queue, offset);
                return retry;
            } catch (MQClientException error) {
                if (retry == SEEK_RETRIES_MAX) {
                    throw error;
                }
                Thread.sleep(ROUTE_RETRY_MS);
            }
        }
    }

    @SuppressWarnings("deprecation") // commitSync(): 5.x prefers commit(offsets, persist)
    static Map<String, Object> subscribe(String namesrv, String topic, String group,
                                         String expression, Checker checker, long timeoutMs)
        throws Exception {
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.subscribe(topic, expression);
        consumer.start();
        try {
            pollUntilComplete(consumer, checker, timeoutMs);
            // Auto-commit runs every 5 s: commit now, so the group's progress is on the broker.
            consumer.commitSync();
        } finally {
            consumer.shutdown();
        }
        Map<String, Object> out = new HashMap<>();
        out.put("expression", expression);
        return out;
    }

    /** Each queue's end: the offset after the last message sent to it. */
    static Map<Integer, Long> ends(List<Sent> sent) {
        Map<Integer, Long> ends = new HashMap<>();
        for (Sent one : sent) {
            ends.merge(one.queueId, one.queueOffset + 1, Math::max);
        }
        return ends;
    }

    /** Each queue's seek offset: half its messages, so the first half must not come back. */
    static Map<Integer, Long> halfway(Map<Integer, Long> ends) {
        Map<Integer, Long> offsets = new HashMap<>();
        for (Map.Entry<Integer, Long> end : ends.entrySet()) {
            offsets.put(end.getKey(), end.getValue() / 2);
        }
        return offsets;
    }
}
