// Consumer send-back with the Go client's push consumer (CLUSTERING, concurrently, one message
// per call): when the callback returns consumer.ConsumeRetryLater the client sends the message
// back (CONSUMER_SEND_MSG_BACK, code 36, delay level 0), and the broker redelivers it through
// %RETRY%<group> after delay level 3 + reconsumeTimes, or, once reconsumeTimes reached the
// consumer's maxReconsumeTimes, stores it in %DLQ%<group>.
//
//	-mode retry  each message fails its first delivery and succeeds the second
//	-mode dlq    every delivery fails, consumer.WithMaxReconsumeTimes(-max-reconsume-times);
//	             the dead-letter topic is read back with a push consumer of another group,
//	             and the scenario stays -quiet-ms after the last delivery (no further one
//	             may come)
//
// It reports what it saw, each delivery with its time, and leaves the verdict to the test.
//
// The client asks the name server for its topics' routes when a consumer starts and then
// every 30 s (fixed in v2.1.2; the Java scenarios poll every second), and RocketMQ creates
// %RETRY%<group> when a heartbeat first names the group: a consumer that starts with a new
// group would read its retry topic only half a minute later.  So a first consumer of the
// group reads a warm-up message and stops (prepareRetryTopic), as a consumer that ran before
// would have, and the consumer that is measured finds the retry topic routed when it starts.
package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	waitStep        = 100 * time.Millisecond
	tail            = 1500 * time.Millisecond
	dlqReadTimeout  = 15 * time.Second
	dlqReaderSuffix = "-dlq-reader"
	routeTimeout    = 15 * time.Second
	noPermission    = "CODE: 16 "
)

// delivery is one message as a callback received it.
type delivery struct {
	AtMs            int64    `json:"atMs"`
	ReconsumeTimes  int32    `json:"reconsumeTimes"`
	Topic           string   `json:"topic"`
	QueueTopic      string   `json:"queueTopic"`
	QueueID         int      `json:"queueId"`
	QueueOffset     int64    `json:"queueOffset"`
	MsgID           string   `json:"msgId"`
	OffsetMsgID     string   `json:"offsetMsgId"`
	RetryTopic      string   `json:"retryTopic"`
	OriginMessageID string   `json:"originMessageId"`
	Mismatches      []string `json:"mismatches"`
}

// mismatches lists how m's body, tags, keys, user properties and message id differ from s's.
func mismatches(s sent, m *primitive.MessageExt) []string {
	out := []string{}
	if s.message == nil {
		return append(out, "received before its send returned")
	}
	check := func(what string, want, got any) {
		if want != got {
			out = append(out, fmt.Sprintf("%s: sent %v, received %v", what, want, got))
		}
	}
	if !bytes.Equal(s.message.Body, m.Body) {
		out = append(out, fmt.Sprintf("body differs (%d bytes received)", len(m.Body)))
	}
	check("tags", s.message.GetTags(), m.GetTags())
	check("keys", s.message.GetKeys(), m.GetKeys())
	check("msgId", s.msgID, m.MsgId)
	for _, name := range []string{"idx", "color", "note"} {
		check("property "+name, s.message.GetProperty(name), m.GetProperty(name))
	}
	return out
}

func newDelivery(at time.Time, s sent, m *primitive.MessageExt) delivery {
	return delivery{
		AtMs: at.UnixMilli(), ReconsumeTimes: m.ReconsumeTimes, Topic: m.Topic,
		QueueTopic: m.Queue.Topic, QueueID: m.Queue.QueueId, QueueOffset: m.QueueOffset,
		MsgID: m.MsgId, OffsetMsgID: m.OffsetMsgId,
		RetryTopic:      m.GetProperty(primitive.PropertyRetryTopic),
		OriginMessageID: m.GetProperty(primitive.PropertyOriginMessageId),
		Mismatches:      mismatches(s, m),
	}
}

// deliveryLog holds every delivery of each sent message; safe for concurrent use.
// Message warmUp (if >= 0) is counted apart.
type deliveryLog struct {
	mu        sync.Mutex
	sent      []sent
	byIndex   map[int][]delivery
	strangers int
	warmUp    int
	warmUps   int
	lastAt    time.Time
}

func newDeliveryLog(messages []sent, warmUp int) *deliveryLog {
	return &deliveryLog{sent: messages, byIndex: map[int][]delivery{}, warmUp: warmUp}
}

// record notes m's delivery and tells whether it is one of the sent messages.
func (l *deliveryLog) record(m *primitive.MessageExt) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	index, err := strconv.Atoi(m.GetProperty("idx"))
	if err == nil && index == l.warmUp {
		l.warmUps++
		return false
	}
	if err != nil || index < 0 || index >= len(l.sent) {
		l.strangers++
		return false
	}
	l.byIndex[index] = append(l.byIndex[index], newDelivery(now, l.sent[index], m))
	l.lastAt = now
	return true
}

// complete: every sent message came at least `each` times.
func (l *deliveryLog) complete(each int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for index := range l.sent {
		if len(l.byIndex[index]) < each {
			return false
		}
	}
	return true
}

func (l *deliveryLog) awaitEach(each int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !l.complete(each) && time.Now().Before(deadline) {
		time.Sleep(waitStep)
	}
	return l.complete(each)
}

func (l *deliveryLog) last() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastAt
}

// report lists each sent message with where its send put it and its deliveries.
func (l *deliveryLog) report() ([]map[string]any, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	messages := make([]map[string]any, 0, len(l.sent))
	for index, s := range l.sent {
		deliveries := append([]delivery{}, l.byIndex[index]...)
		messages = append(messages, map[string]any{
			"index": index, "msgId": s.msgID, "queueId": s.queueID, "queueOffset": s.offset,
			"deliveries": deliveries,
		})
	}
	return messages, l.strangers
}

// pushConsumer starts a push consumer of group on topic, from the first offset, one message
// per callback; the callback records each message and fails a sent one (record says which)
// while its reconsumeTimes is below failRounds.  maxReconsumeTimes < 0 keeps the client's
// default.
func pushConsumer(o options, group, topic string, maxReconsumeTimes int, failRounds int32,
	record func(*primitive.MessageExt) bool) (rocketmq.PushConsumer, error) {
	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{o.namesrv})),
		consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumeMessageBatchMaxSize(1),
		consumer.WithCredentials(o.credentials()),
		// Its own client instance: two consumers sharing one would both stop at the first
		// one's Shutdown.
		consumer.WithInstance(group),
	}
	if maxReconsumeTimes >= 0 {
		opts = append(opts, consumer.WithMaxReconsumeTimes(int32(maxReconsumeTimes)))
	}
	pc, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return nil, err
	}
	err = pc.Subscribe(topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			fail := false
			for _, m := range msgs {
				known := record(m)
				fail = fail || (known && m.ReconsumeTimes < failRounds)
			}
			if fail {
				return consumer.ConsumeRetryLater, nil
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return nil, err
	}
	if err := pc.Start(); err != nil {
		return nil, err
	}
	return pc, nil
}

// redeliver runs -mode retry or dlq.
func redeliver(o options) (map[string]any, error) {
	dlq := o.mode == "dlq"
	rounds, failRounds, maxReconsume := 2, int32(1), -1
	if dlq {
		rounds, failRounds, maxReconsume = o.maxReconsumeTimes+1, math.MaxInt32, o.maxReconsumeTimes
	}
	retryRoute, err := prepareRetryTopic(o)
	if err != nil {
		return nil, fmt.Errorf("%%RETRY%% topic: %w", err)
	}
	messages, err := produce(o)
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	log := newDeliveryLog(messages, o.count)
	pc, err := pushConsumer(o, o.group, o.topic, maxReconsume, failRounds, log.record)
	if err != nil {
		return nil, fmt.Errorf("push consumer: %w", err)
	}
	out := map[string]any{"scenario": "go-" + o.mode, "group": o.group, "sent": len(messages),
		"rounds": rounds, "retryRouteMs": retryRoute.Milliseconds()}
	out["allDelivered"] = log.awaitEach(rounds, o.timeout)
	if dlq {
		dlqTopic := "%DLQ%" + o.group
		out["dlqTopic"] = dlqTopic
		out["dlqRead"] = readDlq(o, dlqTopic, messages)
		out["quietMs"] = o.quietMs
		time.Sleep(time.Until(log.last().Add(time.Duration(o.quietMs) * time.Millisecond)))
	} else {
		time.Sleep(tail)
	}
	_ = pc.Shutdown()
	out["messages"], out["strangers"] = log.report()
	log.mu.Lock()
	out["warmUpDeliveries"] = log.warmUps
	log.mu.Unlock()
	return out, nil
}

// readDlq reads dlqTopic from its first offset with a push consumer of a new group (so the
// topic must be routable and readable) until every sent message came or dlqReadTimeout.  It
// first waits for the route: the last delivery is seen before the consumer sends it back, so
// the broker may not have dead-lettered it yet.
func readDlq(o options, dlqTopic string, messages []sent) map[string]any {
	if err := awaitRoute(o, dlqTopic, routeTimeout); err != nil {
		return map[string]any{"routeError": err.Error()}
	}
	log := newDeliveryLog(messages, -1)
	pc, err := pushConsumer(o, o.group+dlqReaderSuffix, dlqTopic, -1, 0, log.record)
	if err != nil {
		return map[string]any{"routeError": err.Error()}
	}
	log.awaitEach(1, dlqReadTimeout)
	time.Sleep(tail) // a duplicate would show up here
	_ = pc.Shutdown()
	found, strangers := log.report()
	return map[string]any{"messages": found, "strangers": strangers}
}

// prepareRetryTopic sends a warm-up message (corpus index -count, which is not measured),
// lets a first consumer of the group read it (its heartbeat names the group, so RocketMQ
// creates %RETRY%<group>), stops that consumer, and waits until the name server routes
// %RETRY%<group>; it returns how long that took.
func prepareRetryTopic(o options) (time.Duration, error) {
	began := time.Now()
	p, err := delayedProducer(o)
	if err != nil {
		return 0, err
	}
	warmUp, report := sendDelayed(p, o, o.count, 0)
	_ = p.Shutdown()
	if report["status"] != "SEND_OK" {
		return 0, fmt.Errorf("warm-up send: %v", report)
	}
	log := newDeliveryLog(append(make([]sent, o.count), warmUp), -1)
	pc, err := pushConsumer(o, o.group, o.topic, -1, 0, log.record)
	if err != nil {
		return 0, err
	}
	came := log.awaitIndex(o.count, o.timeout)
	_ = pc.Shutdown()
	if !came {
		return 0, fmt.Errorf("the warm-up message did not come in %v", o.timeout)
	}
	err = awaitRoute(o, "%RETRY%"+o.group, routeTimeout)
	return time.Since(began), err
}

// awaitRoute asks the name server for topic's route until it has one, or timeout.  The
// admin client does not sign its route queries, so a name server that refuses unsigned
// requests (a broker's own front with a users file; it routes a topic as soon as it holds
// it, with no registration to wait for) cannot be asked: then it returns at once.
func awaitRoute(o options, topic string, timeout time.Duration) error {
	a, err := admin.NewAdmin(
		admin.WithResolver(primitive.NewPassthroughResolver([]string{o.namesrv})),
		admin.WithCredentials(o.credentials()),
	)
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	deadline := time.Now().Add(timeout)
	for {
		_, err = a.FetchPublishMessageQueues(context.Background(), topic)
		if err != nil && o.accessKey != "" && strings.Contains(err.Error(), noPermission) {
			return nil
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(waitStep)
	}
}
