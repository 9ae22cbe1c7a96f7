package org.mqstore.clients;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.message.Message;

/** One message as sent, with what the send told about where it went (-1: not told). */
final class Sent {
    final int index;
    final Message message;
    final String msgId;
    final String offsetMsgId;
    final int queueId;
    final long queueOffset;

    Sent(int index, Message message, String msgId, String offsetMsgId, int queueId,
         long queueOffset) {
        this.index = index;
        this.message = message;
        this.msgId = msgId;
        this.offsetMsgId = offsetMsgId;
        this.queueId = queueId;
        this.queueOffset = queueOffset;
    }

    /** What the Python side needs to ask mqadmin about this message. */
    Map<String, Object> describe() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("index", index);
        out.put("msgId", msgId);
        out.put("offsetMsgId", offsetMsgId);
        out.put("queueId", queueId);
        out.put("queueOffset", queueOffset);
        out.put("keys", message.getKeys());
        out.put("tags", message.getTags());
        return out;
    }
}
