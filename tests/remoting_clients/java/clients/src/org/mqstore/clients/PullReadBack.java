package org.mqstore.clients;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The read-back that verifies the producer scenarios: every queue read from offset 0 to its
 * end with plain synchronous pulls (DefaultMQPullConsumer), one request at a time.  A lite
 * pull consumer starts pulling in the background as soon as queues are assigned, and a pull
 * in flight when its seek lands hands over its batch again or moves the position past it
 * (the client's own race, seen against RocketMQ and mqstore alike); here nothing runs that
 * the read-back did not ask for, so a duplicate or a gap is the server's.
 */
@SuppressWarnings("deprecation") // DefaultMQPullConsumer: deprecated in 5.x, still shipped
final class PullReadBack {
    private static final int PULL_BATCH = 32;
    private static final long ROUTE_RETRY_MS = 500;
    private static final long PULL_TIMEOUT_MS = 10_000;

    private PullReadBack() {
    }

    /**
     * Commits the group's offset of each queue in {@code offsets}, synchronously, before
     * another client of the group starts.  One pull per queue first: it creates the group on
     * a RocketMQ 5.x broker, which refuses offsets of a group it does not know (code 26).
     */
    static void commit(String namesrv, String topic, String group, Map<Integer, Long> offsets,
                       long timeoutMs) throws Exception {
        DefaultMQPullConsumer consumer = Clients.pull(namesrv, group, group + "-commit");
        consumer.start();
        try {
            long deadline = System.currentTimeMillis() + timeoutMs;
            for (MessageQueue queue : awaitRoute(consumer, topic, deadline)) {
                Long offset = offsets.get(queue.getQueueId());
                if (offset != null) {
                    consumer.pull(queue, "*", offset, 1, PULL_TIMEOUT_MS);
                    consumer.getOffsetStore().updateConsumeOffsetToBroker(queue, offset, false);
                }
            }
        } finally {
            consumer.shutdown();
        }
    }

    static Map<String, Object> readAll(String namesrv, String topic, String group,
                                       Checker checker, long timeoutMs) throws Exception {
        DefaultMQPullConsumer consumer = Clients.pull(namesrv, group, group);
        consumer.start();
        Map<String, Object> out = new HashMap<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        try {
            List<MessageQueue> queues = awaitRoute(consumer, topic, deadline);
            Map<MessageQueue, Long> next = new HashMap<>();
            int pulls = 0;
            while (!checker.complete() && System.currentTimeMillis() < deadline) {
                for (MessageQueue queue : queues) {
                    pulls += readQueue(consumer, queue, next, checker, deadline);
                }
                if (!checker.complete()) {
                    Thread.sleep(ROUTE_RETRY_MS);  // not all dispatched yet: pull on from there
                }
            }
            // One more pull past each queue's end: a message answered twice or past the end
            // would reach the checker as a duplicate or a stranger.
            for (MessageQueue queue : queues) {
                pulls += readQueue(consumer, queue, next, checker, deadline);
            }
            out.put("queues", queues.size());
            out.put("pulls", pulls);
        } finally {
            consumer.shutdown();
        }
        return out;
    }

    /** Pulls one queue from where the last pass stopped (0 at first) until nothing is found;
     *  returns the pulls made. */
    private static int readQueue(DefaultMQPullConsumer consumer, MessageQueue queue,
                                 Map<MessageQueue, Long> next, Checker checker, long deadline)
        throws Exception {
        int pulls = 0;
        while (System.currentTimeMillis() < deadline) {
            long offset = next.getOrDefault(queue, 0L);
            PullResult result = consumer.pull(queue, "*", offset, PULL_BATCH, PULL_TIMEOUT_MS);
            pulls++;
            if (result.getPullStatus() != PullStatus.FOUND) {
                return pulls;
            }
            for (MessageExt message : result.getMsgFoundList()) {
                checker.receive(message);
            }
            next.put(queue, result.getNextBeginOffset());
        }
        return pulls;
    }

    private static List<MessageQueue> awaitRoute(DefaultMQPullConsumer consumer, String topic,
                                                 long deadline) throws Exception {
        while (true) {
            try {
                return new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
            } catch (MQClientException notYet) {
                if (System.currentTimeMillis() > deadline) {
                    throw notYet;
                }
                Thread.sleep(ROUTE_RETRY_MS);
            }
        }
    }
}
