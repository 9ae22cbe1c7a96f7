package org.mqstore.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code transaction}: a TransactionMQProducer sends --count messages in transactions whose
 * local transaction answers, by index mod 3, COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW; its
 * checkLocalTransaction answers COMMIT_MESSAGE for the unknown ones (and the first answer for
 * the others, should the broker ask).  A push consumer already reading the topic must receive
 * each committed and each checked-then-committed message exactly once, with its body, and
 * never a rolled-back one, within --timeout-s; then the scenario listens --tail-ms more for
 * what must not come.  A warm-up message (a plain send) creates the topic first.  The broker
 * must run with a short transactionCheckInterval / transactionTimeOut for this to take
 * seconds (the tests' brokers do).
 */
final class Transactions {
    private static final long WAIT_STEP_MS = 100;
    private static final String[] DECISIONS = {"commit", "rollback", "unknown"};

    private Transactions() {
    }

    static Map<String, Object> run(Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-txn");
        int count = args.integer("count", 6);
        long timeoutMs = args.integer("timeout-s", 60) * 1000L;
        long tailMs = args.integer("tail-ms", 3000);
        args.checkAllUsed();
        Corpus corpus = new Corpus(topic, 64);
        Listener listener = new Listener();
        Received received = new Received();
        Map<String, Object> out = new LinkedHashMap<>();
        List<Object> sends = new ArrayList<>();
        TransactionMQProducer producer = producer(namesrv, "p-" + group, listener);
        producer.start();
        try {
            producer.send(corpus.message(count));  // creates the topic
            DefaultMQPushConsumer consumer = received.consumer(namesrv, topic, group);
            try {
                out.put("warmUpReceived", received.await(count, timeoutMs));
                for (int i = 0; i < count; i++) {
                    sends.add(send(producer, corpus.message(i), i));
                }
                long deadline = System.currentTimeMillis() + timeoutMs;
                while (!received.allOf(committed(count))
                    && System.currentTimeMillis() < deadline) {
                    Thread.sleep(WAIT_STEP_MS);
                }
                out.put("allCommittedReceivedMs", received.allOf(committed(count))
                    ? System.currentTimeMillis() - (deadline - timeoutMs) : null);
                Thread.sleep(tailMs);
            } finally {
                consumer.shutdown();
            }
        } finally {
            producer.shutdown();
        }
        out.put("sends", sends);
        judge(out, count, corpus, listener, received);
        return out;
    }

    private static TransactionMQProducer producer(String namesrv, String group,
                                                  TransactionListener listener) {
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(group);
        producer.setVipChannelEnabled(false);
        producer.setPollNameServerInterval(Clients.ROUTE_POLL_MS);
        producer.setSendMsgTimeout(Clients.SEND_TIMEOUT_MS);
        producer.setDefaultTopicQueueNums(4);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setTransactionListener(listener);
        return producer;
    }

    private static Map<String, Object> send(TransactionMQProducer producer, Message message,
                                            int index) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("index", index);
        out.put("decision", DECISIONS[index % 3]);
        try {
            TransactionSendResult result = producer.sendMessageInTransaction(message, null);
            out.put("status", String.valueOf(result.getSendStatus()));
            out.put("localState", String.valueOf(result.getLocalTransactionState()));
            out.put("queueOffset", result.getQueueOffset());
            out.put("transactionId", result.getTransactionId());
            out.put("ok", result.getSendStatus() == SendStatus.SEND_OK);
        } catch (Exception error) {
            out.put("error", String.valueOf(error));
            out.put("ok", false);
        }
        return out;
    }

    private static List<Integer> committed(int count) {
        List<Integer> indexes = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            if (i % 3 != 1) {
                indexes.add(i);
            }
        }
        return indexes;
    }

    /** Per index: what was decided, how often it was checked and delivered, its body. */
    private static void judge(Map<String, Object> out, int count, Corpus corpus,
                              Listener listener, Received received) {
        List<String> problems = new ArrayList<>();
        List<Object> messages = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int expected = i % 3 == 1 ? 0 : 1;
            int deliveries = received.count(i);
            int checks = listener.checks(i);
            Map<String, Object> message = new LinkedHashMap<>();
            message.put("index", i);
            message.put("decision", DECISIONS[i % 3]);
            message.put("deliveries", deliveries);
            message.put("checks", checks);
            messages.add(message);
            if (deliveries != expected) {
                problems.add("message " + i + " (" + DECISIONS[i % 3] + ") delivered "
                    + deliveries + " times, expected " + expected);
            }
            if (i % 3 == 2 && checks == 0) {
                problems.add("message " + i + " (unknown) was never checked");
            }
            MessageExt first = received.first.get(i);
            if (first != null && !Arrays.equals(first.getBody(), corpus.body(i))) {
                problems.add("message " + i + " arrived with another body");
            }
        }
        out.put("messages", messages);
        out.put("problems", problems);
        out.put("ok", problems.isEmpty() && Boolean.TRUE.equals(out.get("warmUpReceived")));
    }

    /** The local transaction: decided by index; checks counted. */
    private static final class Listener implements TransactionListener {
        private final Map<Integer, AtomicInteger> checks = new ConcurrentHashMap<>();

        @Override
        public LocalTransactionState executeLocalTransaction(Message message, Object arg) {
            return decided(message, false);
        }

        @Override
        public LocalTransactionState checkLocalTransaction(MessageExt message) {
            return decided(message, true);
        }

        private LocalTransactionState decided(Message message, boolean checking) {
            int index = Integer.parseInt(message.getUserProperty(Corpus.INDEX_PROPERTY));
            if (checking) {
                checks.computeIfAbsent(index, k -> new AtomicInteger()).incrementAndGet();
            }
            switch (index % 3) {
                case 0:
                    return LocalTransactionState.COMMIT_MESSAGE;
                case 1:
                    return LocalTransactionState.ROLLBACK_MESSAGE;
                default:
                    return checking ? LocalTransactionState.COMMIT_MESSAGE
                        : LocalTransactionState.UNKNOW;
            }
        }

        int checks(int index) {
            AtomicInteger counted = checks.get(index);
            return counted == null ? 0 : counted.get();
        }
    }

    /** What the push consumer received: each index's first message and its count. */
    private static final class Received {
        final Map<Integer, MessageExt> first = new ConcurrentHashMap<>();
        private final Map<Integer, AtomicInteger> counts = new ConcurrentHashMap<>();

        DefaultMQPushConsumer consumer(String namesrv, String topic, String group)
            throws Exception {
            DefaultMQPushConsumer consumer = Clients.push(namesrv, group, group);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                for (MessageExt message : messages) {
                    String text = message.getUserProperty(Corpus.INDEX_PROPERTY);
                    if (text != null) {
                        int index = Integer.parseInt(text);
                        first.putIfAbsent(index, message);
                        counts.computeIfAbsent(index, k -> new AtomicInteger()).incrementAndGet();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            return consumer;
        }

        int count(int index) {
            AtomicInteger counted = counts.get(index);
            return counted == null ? 0 : counted.get();
        }

        boolean allOf(List<Integer> indexes) {
            return first.keySet().containsAll(indexes);
        }

        boolean await(int index, long timeoutMs) throws InterruptedException {
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (!first.containsKey(index) && System.currentTimeMillis() < deadline) {
                Thread.sleep(WAIT_STEP_MS);
            }
            return first.containsKey(index);
        }
    }
}
