package org.mqstore.clients;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Scenarios with Apache RocketMQ's own remoting client, one per subcommand, each printing one
 * JSON line on stdout: {@code {"scenario": ..., "ok": ..., "missing": [...], ...}}.
 *
 * <pre>
 *   produce        --mode sync|async|oneway|batch|selector, then read back and check
 *   lite-subscribe DefaultLitePullConsumer.subscribe with --expression ("*", "TagA || TagB")
 *   lite-assign    DefaultLitePullConsumer.assign every queue, seek to 0
 *   lite-seek      assign, seek each queue halfway: only the second halves come back
 *   push-concurrently, push-orderly, push-rebalance (two instances in one group)
 *   retry, dlq     a push consumer's RECONSUME_LATER: redelivery, dead letters (see Redelivery)
 *   delay          Message.setDelayTimeLevel, received after the level's wait (see Delayed)
 *   transaction    TransactionMQProducer: commit, rollback, unknown then checked (see Transactions)
 *   sql92          MessageSelector.bySql: --consumer push|lite|refused (see SqlFilter)
 *   request-reply  DefaultMQProducer.request answered by MessageUtil.createReplyMessage (see Reply)
 *   trace          a traced producer and push consumer, read back from the trace topic (see Traced)
 *   load           a sync producer at a steady rate and a push consumer, until a stop file (see Load)
 *   bench-produce, bench-batch, bench-consume, bench-latency (see Bench)
 *   refused        one send and two route lookups, each reported with its exceptions
 *   check-selftest the Checker against spoiled messages, no server (see SelfTest)
 * </pre>
 *
 * Common options: --namesrv host:port --topic T [--count N] [--body-bytes B] [--timeout-s S]
 * [--access-key K --secret-key S] (every client signs with AclClientRPCHook).
 * The exit status is 0 whenever the scenario ran; its verdict is the line's "ok".
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw new IllegalArgumentException("usage: Main SCENARIO --namesrv H:P --topic T ...");
        }
        String scenario = argv[0];
        Args args = new Args(argv, 1);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("scenario", scenario);
        if (scenario.equals("check-selftest")) {
            args.checkAllUsed();
            out.putAll(SelfTest.run());
        } else if (scenario.startsWith("bench-")) {
            Clients.signWith(args);
            out.putAll(Bench.run(scenario, args));
        } else if (scenario.equals("refused")) {
            Clients.signWith(args);
            out.putAll(Refused.run(args));
        } else if (Redelivery.SCENARIOS.contains(scenario)) {
            Clients.signWith(args);
            out.putAll(Redelivery.run(scenario, args));
        } else if (scenario.equals("delay")) {
            Clients.signWith(args);
            out.putAll(Delayed.run(args));
        } else if (scenario.equals("transaction")) {
            out.putAll(Transactions.run(args));
        } else if (scenario.equals(SqlFilter.SCENARIO)) {
            Clients.signWith(args);
            out.putAll(SqlFilter.run(args));
        } else if (scenario.equals("request-reply")) {
            Clients.signWith(args);
            out.putAll(Reply.run(args));
        } else if (scenario.equals(Load.SCENARIO)) {
            Clients.signWith(args);
            out.putAll(Load.run(args));
        } else if (scenario.equals("trace")) {
            Clients.signWith(args);
            out.putAll(Traced.run(args));
        } else {
            Clients.signWith(args);
            out.putAll(Scenarios.run(scenario, args));
        }
        System.out.println(Json.write(out));
        System.out.flush();
        // Client threads (netty, rebalance, timers) are not daemons: leave without waiting.
        System.exit(0);
    }

    static List<String> scenarios() {
        return Arrays.asList("produce", "lite-subscribe", "lite-assign", "lite-seek",
            "push-concurrently", "push-orderly", "push-rebalance");
    }
}
