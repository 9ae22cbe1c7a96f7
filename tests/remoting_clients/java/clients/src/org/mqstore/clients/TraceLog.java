package org.mqstore.clients;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The message-trace records of some messages, read back from the trace topic.
 *
 * <p>A traced client's inner producer stores records in batches: each trace message's body is
 * records ended by char 2, each record fields joined by char 1, the first field its type
 * ({@code TraceDataEncoder}, the same in 4.9.8 and 5.5.0); its KEYS are the traced message ids
 * and keys.  The fields of the types read here:
 *
 * <pre>
 *   Pub        type timeStamp regionId groupName topic msgId tags keys storeHost bodyLength
 *              costTime msgType offsetMsgId success
 *   SubBefore  type timeStamp regionId groupName requestId msgId retryTimes keys
 *   SubAfter   type requestId msgId costTime success keys contextCode timeStamp groupName
 * </pre>
 *
 * The topic is read from its first offset by a lite pull consumer of a new group assigned to
 * every queue the name server routes for it; records of other messages are skipped.
 */
final class TraceLog {
    static final char FIELD_END = (char) 1;
    static final char RECORD_END = (char) 2;
    static final Map<String, List<String>> FIELDS = new LinkedHashMap<>();
    private static final long POLL_MS = 500;
    private static final long TAIL_POLL_MS = 1000;

    static {
        FIELDS.put("Pub", Arrays.asList("type", "timeStamp", "regionId", "groupName", "topic",
            "msgId", "tags", "keys", "storeHost", "bodyLength", "costTime", "msgType",
            "offsetMsgId", "success"));
        FIELDS.put("SubBefore", Arrays.asList("type", "timeStamp", "regionId", "groupName",
            "requestId", "msgId", "retryTimes", "keys"));
        FIELDS.put("SubAfter", Arrays.asList("type", "requestId", "msgId", "costTime",
            "success", "keys", "contextCode", "timeStamp", "groupName"));
    }

    /** msgId -> type -> the records of that type, each its fields by name. */
    private final Map<String, Map<String, List<Map<String, Object>>>> byMsgId = new HashMap<>();
    private int traceMessages;
    private int records;

    TraceLog(Collection<String> msgIds) {
        for (String msgId : msgIds) {
            Map<String, List<Map<String, Object>>> types = new LinkedHashMap<>();
            for (String type : FIELDS.keySet()) {
                types.put(type, new ArrayList<>());
            }
            byMsgId.put(msgId, types);
        }
    }

    List<Map<String, Object>> records(String msgId, String type) {
        return byMsgId.get(msgId).get(type);
    }

    /** Every message has at least one record of each type. */
    boolean complete() {
        for (Map<String, List<Map<String, Object>>> types : byMsgId.values()) {
            for (List<Map<String, Object>> list : types.values()) {
                if (list.isEmpty()) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Reads the trace topic until {@link #complete} or the timeout, then one more poll. */
    Map<String, Object> read(String namesrv, String traceTopic, String group, long timeoutMs)
        throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        long start = System.currentTimeMillis();
        DefaultLitePullConsumer consumer = Clients.litePull(namesrv, group, group);
        consumer.setAutoCommit(false);
        consumer.start();
        try {
            List<MessageQueue> queues;
            try {
                queues = LitePull.awaitRoute(consumer, traceTopic, timeoutMs);
            } catch (MQClientException noRoute) {
                out.put("routeError", String.valueOf(noRoute.getMessage()));
                return out;
            }
            out.put("queues", queues.size());
            consumer.assign(queues);
            long deadline = start + timeoutMs;
            while (!complete() && System.currentTimeMillis() < deadline) {
                take(consumer.poll(POLL_MS));
            }
            out.put("completeAfterMs", complete() ? System.currentTimeMillis() - start : null);
            take(consumer.poll(TAIL_POLL_MS));  // a duplicate record would show up here
        } finally {
            consumer.shutdown();
        }
        out.put("traceMessages", traceMessages);
        out.put("records", records);
        return out;
    }

    private void take(List<MessageExt> messages) {
        for (MessageExt message : messages) {
            traceMessages++;
            String keys = message.getKeys();
            Set<String> traceKeys = new HashSet<>(keys == null ? new ArrayList<>()
                : Arrays.asList(keys.split(" ")));
            String body = new String(message.getBody(), StandardCharsets.UTF_8);
            for (String text : body.split(String.valueOf(RECORD_END))) {
                if (!text.isEmpty()) {
                    records++;
                    add(parse(text), traceKeys);
                }
            }
        }
    }

    /** One record's fields by name ({@code fields} counts them; unknown types: type only). */
    static Map<String, Object> parse(String text) {
        String[] values = text.split(String.valueOf(FIELD_END), -1);
        Map<String, Object> record = new LinkedHashMap<>();
        List<String> names = FIELDS.get(values[0]);
        record.put("type", values[0]);
        record.put("fields", values.length);
        for (int i = 1; names != null && i < Math.min(names.size(), values.length); i++) {
            record.put(names.get(i), values[i]);
        }
        return record;
    }

    private void add(Map<String, Object> record, Set<String> traceKeys) {
        Object msgId = record.get("msgId");
        Map<String, List<Map<String, Object>>> types = msgId == null ? null : byMsgId.get(msgId);
        if (types == null || !types.containsKey(record.get("type"))) {
            return;
        }
        record.put("traceMessageKeyed", traceKeys.contains(msgId));
        types.get(record.get("type")).add(record);
    }

    /** How many records of each type the given ids have, for the result line. */
    Map<String, Object> counts() {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String type : FIELDS.keySet()) {
            int total = 0;
            for (Map<String, List<Map<String, Object>>> types : byMsgId.values()) {
                total += types.get(type).size();
            }
            out.put(type, total);
        }
        return out;
    }
}
