package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * DefaultMQPushConsumer, concurrently and orderly.  Orderly also checks that each queue's
 * messages arrive in queue-offset order.  {@link #queues} reads which queues a consumer holds
 * after its rebalance (the client's own table), for the two-instance scenario.
 */
final class Push {
    private static final long WAIT_STEP_MS = 100;
    private static final long TAIL_WAIT_MS = 1000;

    private Push() {
    }

    static DefaultMQPushConsumer concurrently(String namesrv, String topic, String group,
                                              String instance, Checker checker,
                                              Map<Integer, String> queueOwners) throws Exception {
        DefaultMQPushConsumer consumer = Clients.push(namesrv, group, instance);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                if (checker.receive(message) && queueOwners != null) {
                    String previous = queueOwners.putIfAbsent(message.getQueueId(), instance);
                    if (previous != null && !previous.equals(instance)) {
                        checker.mismatch("queue " + message.getQueueId() + " consumed by "
                            + previous + " and " + instance);
                    }
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    static DefaultMQPushConsumer orderly(String namesrv, String topic, String group,
                                         Checker checker) throws Exception {
        DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
        consumer.subscribe(topic, "*");
        Map<Integer, Long> lastOffsets = new ConcurrentHashMap<>();
        AtomicInteger outOfOrder = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerOrderly) (messages, context) -> {
            for (MessageExt message : messages) {
                checker.receive(message);
                Long last = lastOffsets.put(message.getQueueId(), message.getQueueOffset());
                if (last != null && last >= message.getQueueOffset()) {
                    checker.mismatch("queue " + message.getQueueId() + ": offset "
                        + message.getQueueOffset() + " after " + last);
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    static void awaitComplete(Checker checker, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!checker.complete() && System.currentTimeMillis() < deadline) {
            Thread.sleep(WAIT_STEP_MS);
        }
        Thread.sleep(TAIL_WAIT_MS);
    }

    /** The queue ids of {@code topic} this consumer holds after its last rebalance. */
    @SuppressWarnings("deprecation")
    static Set<Integer> queues(DefaultMQPushConsumer consumer, String topic) {
        Set<Integer> ids = new TreeSet<>();
        for (MessageQueue queue : new ArrayList<>(consumer.getDefaultMQPushConsumerImpl()
            .getRebalanceImpl().getProcessQueueTable().keySet())) {
            if (queue.getTopic().equals(topic)) {
                ids.add(queue.getQueueId());
            }
        }
        return ids;
    }

    /** Queue id (as text: JSON keys are strings) to the instance that consumed it. */
    static Map<String, Object> owners(Map<Integer, String> queueOwners) {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<Integer, String> owner : queueOwners.entrySet()) {
            out.put(Integer.toString(owner.getKey()), owner.getValue());
        }
        return out;
    }
}
