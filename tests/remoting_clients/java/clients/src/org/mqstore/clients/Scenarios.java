package org.mqstore.clients;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;

/** The functional scenarios: produce what the corpus says, consume it back, check it all. */
final class Scenarios {
    private static final int WARM_UP_MESSAGES = 4;
    private static final long SETTLE_STEP_MS = 500;

    private Scenarios() {
    }

    static Map<String, Object> run(String scenario, Args args) throws Exception {
        String namesrv = args.text("namesrv");
        String topic = args.text("topic");
        String group = args.text("group", "g-" + topic + "-" + scenario);
        int count = args.integer("count", 100);
        Corpus corpus = new Corpus(topic, args.integer("body-bytes", 256));
        long timeoutMs = args.integer("timeout-s", 60) * 1000L;
        String mode = args.text("mode", scenario.equals("push-orderly") ? "selector" : "sync");
        int batchSize = args.integer("batch", 16);
        String expression = args.text("expression", "*");
        boolean reportSent = args.text("report-sent", "false").equals("true");
        args.checkAllUsed();

        Checker checker = new Checker();
        Map<String, Object> out = new LinkedHashMap<>();
        DefaultMQProducer producer = Clients.producer(namesrv, "p-" + group, "p-" + group);
        producer.start();
        try {
            if (scenario.equals("push-rebalance")) {
                out.putAll(rebalance(namesrv, topic, group, producer, corpus, count, checker,
                    timeoutMs));
            } else {
                List<Sent> sent = Produce.run(producer, corpus, mode, count, batchSize, checker);
                out.put("mode", mode);
                out.put("sent", sent.size());
                if (reportSent) {
                    List<Object> described = new ArrayList<>();
                    for (Sent one : sent) {
                        described.add(one.describe());
                    }
                    out.put("sentMessages", described);
                }
                out.putAll(consume(scenario, namesrv, topic, group, sent, expression, checker,
                    timeoutMs));
            }
        } finally {
            producer.shutdown();
        }
        checker.report(out);
        return out;
    }

    private static Map<String, Object> consume(String scenario, String namesrv, String topic,
                                               String group, List<Sent> sent, String expression,
                                               Checker checker, long timeoutMs)
        throws Exception {
        switch (scenario) {
            case "produce":
                checker.expectAll(sent, null);
                return PullReadBack.readAll(namesrv, topic, group, checker, timeoutMs);
            case "lite-assign":
                checker.expectAll(sent, null);
                return LitePull.readAssigned(namesrv, topic, group, new HashMap<>(),
                    new HashMap<>(), checker, timeoutMs);
            case "lite-seek": {
                Map<Integer, Long> ends = LitePull.ends(sent);
                Map<Integer, Long> offsets = LitePull.halfway(ends);
                for (Sent one : sent) {
                    if (one.queueOffset >= offsets.get(one.queueId)) {
                        checker.expect(one);
                    }
                }
                Map<String, Object> out = LitePull.readAssigned(namesrv, topic, group, ends,
                    offsets, checker, timeoutMs);
                out.put("seekOffsets", offsets);
                return out;
            }
            case "lite-subscribe":
                checker.expectAll(sent, Corpus.acceptedTags(expression));
                return LitePull.subscribe(namesrv, topic, group, expression, checker, timeoutMs);
            case "push-concurrently":
            case "push-orderly": {
                checker.expectAll(sent, null);
                DefaultMQPushConsumer consumer = scenario.equals("push-orderly")
                    ? Push.orderly(namesrv, topic, group, checker)
                    : Push.concurrently(namesrv, topic, group, group, checker, null);
                try {
                    Push.awaitComplete(checker, timeoutMs);
                } finally {
                    consumer.shutdown();
                }
                return new HashMap<>();
            }
            default:
                throw new IllegalArgumentException("unknown scenario " + scenario
                    + "; known: " + Main.scenarios());
        }
    }

    /**
     * Two push consumers in one group.  Warm-up messages create the topic (they are not
     * checked); once the two consumers' queues are disjoint and cover the topic, the messages
     * under test are sent, and each queue's messages must all reach the same one consumer.
     */
    private static Map<String, Object> rebalance(String namesrv, String topic, String group,
                                                 DefaultMQProducer producer, Corpus corpus,
                                                 int count, Checker checker, long timeoutMs)
        throws Exception {
        checker.ignoreFrom(count);
        for (int i = count; i < count + WARM_UP_MESSAGES; i++) {
            producer.send(corpus.message(i), Produce.BY_ARGUMENT, i);
        }
        int queueCount = producer.fetchPublishMessageQueues(topic).size();
        Map<Integer, String> owners = new ConcurrentHashMap<>();
        DefaultMQPushConsumer first = Push.concurrently(namesrv, topic, group, "a", checker,
            owners);
        DefaultMQPushConsumer second = Push.concurrently(namesrv, topic, group, "b", checker,
            owners);
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            boolean settled = awaitSplit(first, second, topic, queueCount, timeoutMs);
            out.put("settled", settled);
            out.put("queuesA", Push.queues(first, topic));
            out.put("queuesB", Push.queues(second, topic));
            owners.clear();
            checker.defer();
            List<Sent> sent = Produce.run(producer, corpus, "sync", count, 1, checker);
            checker.expectAll(sent, null);
            checker.release();
            out.put("sent", sent.size());
            Push.awaitComplete(checker, timeoutMs);
            out.put("owners", Push.owners(owners));
        } finally {
            first.shutdown();
            second.shutdown();
        }
        if (!Boolean.TRUE.equals(out.get("settled"))) {
            checker.mismatch("the two consumers never split the queues between them: "
                + out.get("queuesA") + " / " + out.get("queuesB"));
        }
        return out;
    }

    /** Waits until the consumers hold disjoint, non-empty sets covering all queues, twice. */
    private static boolean awaitSplit(DefaultMQPushConsumer first, DefaultMQPushConsumer second,
                                      String topic, int queueCount, long timeoutMs)
        throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        int stableChecks = 0;
        while (System.currentTimeMillis() < deadline && stableChecks < 2) {
            Set<Integer> a = Push.queues(first, topic);
            Set<Integer> b = Push.queues(second, topic);
            Set<Integer> union = new TreeSet<>(a);
            union.addAll(b);
            boolean split = !a.isEmpty() && !b.isEmpty() && union.size() == queueCount
                && a.size() + b.size() == queueCount;
            stableChecks = split ? stableChecks + 1 : 0;
            Thread.sleep(SETTLE_STEP_MS);
        }
        return stableChecks >= 2;
    }
}
