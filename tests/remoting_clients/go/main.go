// Command remoting-clients-go produces N messages with Apache RocketMQ's Go client
// (github.com/apache/rocketmq-client-go/v2) and consumes them back with its push consumer,
// checking each message field by field: body, tags, keys, user properties, queue, offset and
// message id.  It prints one JSON line, like the Java scenarios in ../java/clients:
//
//	{"scenario":"go-produce-consume","ok":true,"expected":N,"missing":[],...}
//
// Usage: remoting-clients-go -namesrv 127.0.0.1:9876 -topic T [-count N] [-timeout-s S]
// [-access-key K -secret-key S]: with credentials, the producer and the consumer sign every
// request (the client's primitive.Credentials, the same signature as AclClientRPCHook).
//
// With -mode retry, dlq or delay it runs a scenario of redelivery.go or delayed.go instead
// (consumer send-back, dead letters, delay levels), which reports what it measured; with
// -mode produce or consume, one half of produce-consume (drain.go).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const samplesMax = 20

var tags = []string{"TagA", "TagB", "TagC"}

type options struct {
	namesrv   string
	topic     string
	group     string
	count     int
	first     int
	bodyBytes int
	timeout   time.Duration
	accessKey string
	secretKey string
	// The scenarios of redelivery.go and delayed.go.
	mode              string
	maxReconsumeTimes int
	quietMs           int
	level             int
	clampLevel        int
	waitMs            int
	// How long the push consumer keeps running once every message came: a duplicate would
	// arrive in it, and the client sends its offsets every 5 s (and, one way, at shutdown).
	tailMs int
}

func (o options) credentials() primitive.Credentials {
	return primitive.Credentials{AccessKey: o.accessKey, SecretKey: o.secretKey}
}

// sent is one message as sent, with where the send said it went.
type sent struct {
	message *primitive.Message
	msgID   string
	queueID int
	offset  int64
	broker  string
}

func parseOptions() options {
	var o options
	var timeoutS int
	flag.StringVar(&o.namesrv, "namesrv", "", "name server host:port")
	flag.StringVar(&o.topic, "topic", "", "topic")
	flag.StringVar(&o.group, "group", "", "consumer group (default: derived from the topic)")
	flag.IntVar(&o.count, "count", 50, "messages to send")
	flag.IntVar(&o.first, "first", 0, "the corpus index of the first message")
	flag.IntVar(&o.bodyBytes, "body-bytes", 256, "body size")
	flag.IntVar(&timeoutS, "timeout-s", 60, "how long to wait for the messages to come back")
	flag.StringVar(&o.accessKey, "access-key", "", "sign requests as this user (with -secret-key)")
	flag.StringVar(&o.secretKey, "secret-key", "", "the user's secret key")
	flag.StringVar(&o.mode, "mode", "produce-consume", "produce-consume, produce, consume, retry, dlq or delay")
	flag.IntVar(&o.maxReconsumeTimes, "max-reconsume-times", 2, "dlq: the consumer's maxReconsumeTimes")
	flag.IntVar(&o.quietMs, "quiet-ms", 6000, "dlq: how long after the last delivery none may come")
	flag.IntVar(&o.level, "level", 2, "delay: the delay level of the delayed messages")
	flag.IntVar(&o.clampLevel, "clamp-level", 99, "delay: the level of one more message (above the table's last)")
	flag.IntVar(&o.waitMs, "wait-ms", 5000, "delay: how long after the last send to wait for the delayed messages")
	flag.IntVar(&o.tailMs, "tail-ms", 1000, "how long the consumer runs on once every message came (above 5000: its offsets are surely sent)")
	flag.Parse()
	if o.namesrv == "" || o.topic == "" {
		fmt.Fprintln(os.Stderr, "-namesrv and -topic are required")
		os.Exit(2)
	}
	if (o.accessKey == "") != (o.secretKey == "") {
		fmt.Fprintln(os.Stderr, "-access-key and -secret-key go together")
		os.Exit(2)
	}
	if o.group == "" {
		o.group = "go-" + o.topic
	}
	resolved, err := resolveNamesrv(o.namesrv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-namesrv:", err)
		os.Exit(2)
	}
	o.namesrv = resolved
	o.timeout = time.Duration(timeoutS) * time.Second
	return o
}

// resolveNamesrv returns host:port with a host name resolved to its first address:
// rocketmq-client-go v2.1.2 takes only IP addresses as name servers
// (primitive.NamesrvAddr.Check), where RocketMQ's Java client takes a host name (a
// Kubernetes Service's, say), so an application of this client resolves it itself.
// Broker addresses in routes may be host names: the client dials them as given.
func resolveNamesrv(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	ips, err := net.LookupHost(host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ips[0], port), nil
}

// message returns message i of the corpus: a pure function of the topic and i.
func message(topic string, index int, bodyBytes int) *primitive.Message {
	body := make([]byte, bodyBytes)
	for i := range body {
		body[i] = byte(index*31 + i*7)
	}
	copy(body, fmt.Sprintf("#%d#", index))
	m := primitive.NewMessage(topic, body)
	m.WithTag(tags[index%len(tags)])
	m.WithKeys([]string{fmt.Sprintf("%s-key-%d", topic, index), fmt.Sprintf("%s-group-%d", topic, index%7)})
	m.WithProperty("idx", strconv.Itoa(index))
	m.WithProperty("color", map[bool]string{true: "red", false: "gr\u00fcn \u20ac"}[index%2 == 0])
	m.WithProperty("note", fmt.Sprintf("a b=c;d:%d", index*13))
	return m
}

// startProducer starts a producer of group go-p-<topic>: no retry (a send's failure is the
// verdict's), 4 queues for a topic it creates, the options' credentials, and `extra`.
func startProducer(o options, extra ...producer.Option) (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(append([]producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{o.namesrv})),
		producer.WithGroupName("go-p-" + o.topic),
		producer.WithRetry(0),
		producer.WithDefaultTopicQueueNums(4),
		producer.WithSendMsgTimeout(10 * time.Second),
		producer.WithCredentials(o.credentials()),
	}, extra...)...)
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

func produce(o options) ([]sent, error) {
	p, err := startProducer(o)
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	out := make([]sent, 0, o.count)
	for i := o.first; i < o.first+o.count; i++ {
		m := message(o.topic, i, o.bodyBytes)
		result, err := p.SendSync(context.Background(), m)
		if err != nil {
			return out, fmt.Errorf("send %d: %w", i, err)
		}
		if result.Status != primitive.SendOK {
			return out, fmt.Errorf("send %d: status %d", i, result.Status)
		}
		out = append(out, sent{m, result.MsgID, result.MessageQueue.QueueId, result.QueueOffset,
			result.MessageQueue.BrokerName})
	}
	return out, nil
}

// checker compares received messages with the sent ones; safe for concurrent use.
type checker struct {
	mu         sync.Mutex
	expected   map[int]sent
	counts     map[int]int
	byBroker   map[string]int
	mismatches []string
	mismatched int
	unexpected int
	received   int
	// corpusOnly: the messages were sent by another run, so only what the corpus fixes is
	// compared (not the message id, queue, offset or broker a send reported).
	corpusOnly bool
}

func (c *checker) mismatch(format string, args ...any) {
	c.mismatched++
	if len(c.mismatches) < samplesMax {
		c.mismatches = append(c.mismatches, fmt.Sprintf(format, args...))
	}
}

func (c *checker) receive(m *primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received++
	index, err := strconv.Atoi(m.GetProperty("idx"))
	s, ok := c.expected[index]
	if err != nil || !ok {
		c.unexpected++
		return
	}
	c.counts[index]++
	c.byBroker[m.Queue.BrokerName]++
	c.compare(index, s, m)
}

func (c *checker) compare(index int, s sent, m *primitive.MessageExt) {
	check := func(what string, want, got any) {
		if want != got {
			c.mismatch("message %d: %s: sent %v, received %v", index, what, want, got)
		}
	}
	check("topic", s.message.Topic, m.Topic)
	if !bytes.Equal(s.message.Body, m.Body) {
		c.mismatch("message %d: body differs (%d bytes received)", index, len(m.Body))
	}
	check("tags", s.message.GetTags(), m.GetTags())
	check("keys", s.message.GetKeys(), m.GetKeys())
	if !c.corpusOnly {
		check("msgId", s.msgID, m.MsgId)
		check("broker", s.broker, m.Queue.BrokerName)
		check("queueId", s.queueID, m.Queue.QueueId)
		check("queueOffset", s.offset, m.QueueOffset)
	}
	for _, name := range []string{"idx", "color", "note"} {
		check("property "+name, s.message.GetProperty(name), m.GetProperty(name))
	}
}

func (c *checker) complete() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.counts) == len(c.expected)
}

func consume(o options, c *checker) error {
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{o.namesrv})),
		consumer.WithGroupName(o.group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithCredentials(o.credentials()),
	)
	if err != nil {
		return err
	}
	err = pc.Subscribe(o.topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				c.receive(m)
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	defer pc.Shutdown()
	deadline := time.Now().Add(o.timeout)
	for !c.complete() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Duration(o.tailMs) * time.Millisecond) // a duplicate would arrive in this tail
	return nil
}

func (c *checker) report(o options, sentCount int) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	missing := []int{}
	duplicates := 0
	for index := range c.expected {
		if n, ok := c.counts[index]; !ok {
			missing = append(missing, index)
		} else {
			duplicates += n - 1
		}
	}
	sort.Ints(missing)
	sentByBroker := map[string]int{}
	for _, s := range c.expected {
		sentByBroker[s.broker]++
	}
	return map[string]any{
		"sentByBroker": sentByBroker, "receivedByBroker": c.byBroker,
		"scenario": "go-produce-consume", "sent": sentCount, "expected": len(c.expected),
		"received": c.received, "missingCount": len(missing),
		"missing": missing[:min(samplesMax, len(missing))], "duplicates": duplicates,
		"unexpected": c.unexpected, "mismatchCount": c.mismatched, "mismatches": append([]string{}, c.mismatches...),
		"ok": len(missing) == 0 && duplicates == 0 && c.unexpected == 0 && c.mismatched == 0 && sentCount == o.count,
	}
}

func main() {
	o := parseOptions()
	rlog.SetLogLevel("error")
	if o.mode != "produce-consume" {
		runScenario(o)
		return
	}
	messages, err := produce(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(1)
	}
	// A topic the sends auto-created is routed once its brokers have registered it (within
	// a second on mqstore; RocketMQ's broker registers it right after creating it); the push
	// consumer needs its route at start.
	if err := awaitRoute(o, o.topic, routeTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "route:", err)
		os.Exit(1)
	}
	c := &checker{expected: map[int]sent{}, counts: map[int]int{},
		byBroker: map[string]int{}}
	for i, s := range messages {
		c.expected[o.first+i] = s
	}
	if err := consume(o, c); err != nil {
		fmt.Fprintln(os.Stderr, "consume:", err)
		os.Exit(1)
	}
	line, _ := json.Marshal(c.report(o, len(messages)))
	fmt.Println(string(line))
}

// runScenario runs the scenario -mode names and prints its JSON line.
func runScenario(o options) {
	var result map[string]any
	var err error
	switch o.mode {
	case "retry", "dlq":
		result, err = redeliver(o)
	case "delay":
		result, err = delayed(o)
	case "produce":
		result, err = produceOnly(o)
	case "consume":
		result, err = consumeOnly(o)
	default:
		err = fmt.Errorf("unknown -mode %q", o.mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, o.mode+":", err)
		os.Exit(1)
	}
	line, _ := json.Marshal(result)
	fmt.Println(string(line))
}
