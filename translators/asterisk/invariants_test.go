package asterisk

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
)

// corpusEnv names the directory of a public AMI corpus for TestPublicCorpusInvariants. It is
// read recursively: `*.ami` files in wire form, and `*.json` files that hold one JSON array of
// events, each an object of AMI keys (the form of VoIPGRID/cacofonisk's tests/fixtures).
const corpusEnv = "CALLWIRE_TEST_AMI_CORPUS"

// defaultCorpus is where the corpus is looked for without the variable: beside the repository.
const defaultCorpus = "../../../shared/corpus/ami"

// violation is one broken invariant of one call of one capture.
type violation struct {
	capture, call, class, detail string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: call %s: %s: %s", v.capture, v.call, v.class, v.detail)
}

// idFields are the prefixes under which an AMI event names a channel (Uniqueid, Linkedid).
var idFields = []string{"", "Dest", "Transferee", "Transferer", "OrigTransferer", "SecondTransferer",
	"TransferTarget", "Target", "LocalOne", "LocalTwo", "Source", "Peer"}

// lidChains is a union-find over Linkedids: two are one chain when a channel carried both (an
// attended transfer, a pickup, a channel moved between calls).
type lidChains map[string]string

func (u lidChains) root(x string) string {
	if _, ok := u[x]; !ok {
		u[x] = x
	}
	for u[x] != x {
		u[x] = u[u[x]]
		x = u[x]
	}
	return x
}

func (u lidChains) union(a, b string) { u[u.root(a)] = u.root(b) }

// callLog is what the checker saw of one providerCallId.
type callLog struct {
	events      []event.Event
	ended       int  // number of call_ended
	endedAt     int  // message index of the (first) call_ended
	answered    bool // a call_answered was emitted
	transferred bool
}

// replayChecked runs msgs through a fresh Tracker exactly as the live session does (Observe, one
// message at a time, in order) and checks every call against the invariants, independently of
// the Tracker's own model: the checker follows the channels and their Linkedids itself.
//
//   - each call that starts ends exactly once, at the message after which its last channel is
//     gone, never before, never after, and nothing of it follows its call_ended;
//   - one call per Linkedid chain (Linkedids a channel carried in turn, or a Pickup joined),
//     except the two calls an attended transfer joins: the consultation ends when joined, and
//     the chain's last call ends with its last channel;
//   - at most one call_answered before any transfer, and none for a call nobody answered (no
//     DialEnd ANSWER to a phone or trunk, no Pickup in its chain);
//   - a call whose chain shows an answer (a DialEnd ANSWER from a channel of that Linkedid,
//     while the call is open, towards a phone or trunk that is not the Linkedid's first such
//     channel: an Originate rings the calling party first, and that is not the call's answer)
//     is answered;
//   - no call_missed for an answered call, nor for one not inbound, and at most one;
//   - a call the PBX originated (its first phone or trunk channel was dialled) is not inbound;
//   - the call_ended disposition is answered exactly when a call_answered came before it (or
//     the call was answered outside the PBX: answeredElsewhere);
//   - every event validates.
func replayChecked(t testing.TB, capture string, msgs []ami.Message) (calls int, vs []violation) {
	t.Helper()
	tr := testTracker(t)
	chains := lidChains{}
	live := map[string]string{}      // Uniqueid → current Linkedid, of channels not yet hung up
	gone := map[string]bool{}        // Uniqueids that hung up
	joinAt := map[string]bool{}      // "lid/index": a transfer, pickup or Linkedid change touched lid at index
	answerIn := map[string][]int{}   // Linkedid → indexes of an answer the AMI shows
	chainAnswer := map[string]bool{} // Linkedid (any of a chain) → the AMI shows an answer or pickup
	realChan := map[string]bool{}    // Linkedids with a channel that is not plumbing
	firstReal := map[string]string{} // Linkedid → Uniqueid of its first channel that is not plumbing
	originated := map[string]bool{}  // Linkedids whose first such channel was dialled: an Originate
	transferIn := map[string]bool{}  // Linkedids named by an AttendedTransfer
	lastOf := map[string]int{}       // Linkedid → index after which it had no live channel
	logs := map[string]*callLog{}
	var order []string
	add := func(class, id, format string, args ...any) {
		vs = append(vs, violation{capture, id, class, fmt.Sprintf(format, args...)})
	}
	for i, m := range msgs {
		ev := strings.ToLower(m.Event())
		touched := map[string]bool{}
		for _, p := range idFields {
			uid, lid := m.Get(p+"Uniqueid"), m.Get(p+"Linkedid")
			if uid == "" || lid == "" || gone[uid] {
				continue
			}
			chains.root(lid)
			if old, ok := live[uid]; ok && old != lid {
				chains.union(old, lid)
				joinAt[fmt.Sprint(old, "/", i)] = true
				touched[old] = true
			}
			live[uid] = lid
			touched[lid] = true
			if name := strings.ToLower(m.Get(p + "Channel")); name != "" && !strings.HasPrefix(name, "local/") {
				realChan[lid] = true
				if _, ok := firstReal[lid]; !ok {
					firstReal[lid] = uid
				}
			}
		}
		switch ev {
		case "attendedtransfer", "pickup":
			var lids []string
			for _, p := range idFields {
				if lid := m.Get(p + "Linkedid"); lid != "" {
					lids = append(lids, lid)
				}
			}
			for _, l := range lids {
				chains.union(l, lids[0])
				joinAt[fmt.Sprint(l, "/", i)] = true
			}
			if ev == "pickup" && len(lids) > 0 {
				chainAnswer[lids[0]] = true
			}
			if ev == "attendedtransfer" {
				for _, l := range lids {
					transferIn[l] = true
				}
			}
		case "dialbegin":
			if lid := m.Get("DestLinkedid"); lid != "" && firstReal[lid] == m.Get("DestUniqueid") {
				originated[lid] = true
			}
		case "dialend":
			// The dialling channel's call is answered, unless the channel that answered is the
			// one that began it: an Originate rings the calling party first.
			lid := m.Get("Linkedid")
			if lid == "" {
				lid = m.Get("DestLinkedid")
			}
			if strings.EqualFold(m.Get("DialStatus"), "ANSWER") && !strings.HasPrefix(strings.ToLower(m.Get("DestChannel")), "local/") &&
				firstReal[lid] != m.Get("DestUniqueid") {
				answerIn[lid] = append(answerIn[lid], i)
				chainAnswer[lid] = true
			}
		case "hangup":
			uid := m.Get("Uniqueid")
			if lid, ok := live[uid]; ok {
				touched[lid] = true
			}
			delete(live, uid)
			gone[uid] = true
		}
		for lid := range touched {
			n := 0
			for _, l := range live {
				if l == lid {
					n++
				}
			}
			if n == 0 {
				lastOf[lid] = i
			} else {
				delete(lastOf, lid)
			}
		}

		for _, e := range tr.Observe(m, epoch.Add(time.Duration(i)*step)) {
			id := e.ProviderCallID
			if err := e.Validate(); err != nil {
				add("invalid event", id, "%s at message %d: %v", e.Type, i, err)
			}
			c := logs[id]
			if c == nil {
				c = &callLog{endedAt: -1}
				logs[id] = c
				order = append(order, id)
			}
			if c.ended > 0 {
				add("event after call_ended", id, "%s at message %d (%s), after call_ended at message %d", e.Type, i, m.Event(), c.endedAt)
			}
			switch e.Type {
			case event.CallAnswered:
				if c.answered && !c.transferred {
					add("second call_answered before any transfer", id, "%s at message %d", e.ProviderEventID, i)
				}
				c.answered = true
			case event.CallTransferred:
				c.transferred = true
			case event.CallMissed:
				if c.answered {
					add("call_missed for an answered call", id, "at message %d", i)
				}
				if slices.ContainsFunc(c.events, func(p event.Event) bool { return p.Type == event.CallMissed }) {
					add("second call_missed", id, "at message %d", i)
				}
				if e.Call.Direction != event.Inbound {
					add("call_missed for a call not inbound", id, "direction %s", e.Call.Direction)
				}
			case event.CallEnded:
				c.ended++
				if c.ended > 1 {
					add("ended twice", id, "call_ended at messages %d and %d", c.endedAt, i)
				} else {
					c.endedAt = i
				}
				elsewhere := e.AnsweredElsewhere != nil && *e.AnsweredElsewhere
				if (e.Disposition == event.DispositionAnswered) != (c.answered || elsewhere) {
					add("disposition disagrees", id, "call_ended %s after %s", e.Disposition, typesOf(c.events))
				}
			}
			if originated[id] && e.Call.Direction == event.Inbound {
				add("originated call reported inbound", id, "%s at message %d: the PBX dialled the first party", e.Type, i)
			}
			c.events = append(c.events, e)
		}
	}

	// Chains: which Linkedids end together, and when the last channel of each went.
	chainEnd := map[string]int{} // chain root → index of its last channel's end (-1: still live)
	for lid := range chains {
		r := chains.root(lid)
		at, ok := lastOf[lid]
		if !ok {
			at = -1
		}
		if prev, seen := chainEnd[r]; !seen || (prev >= 0 && (at < 0 || at > prev)) {
			chainEnd[r] = at
		}
	}
	chainCalls := map[string][]string{}
	for _, id := range order {
		chainCalls[chains.root(id)] = append(chainCalls[chains.root(id)], id)
	}
	for lid := range realChan {
		if r := chains.root(lid); len(chainCalls[r]) == 0 && chainEnd[r] >= 0 {
			add("call never reported", lid, "its channels came and went and no event was emitted")
			chainCalls[r] = nil
		}
	}
	transferChain := map[string]bool{}
	for lid := range transferIn {
		transferChain[chains.root(lid)] = true
	}
	for r, ids := range chainCalls {
		if len(ids) > 1 && !transferChain[r] {
			add("more than one call in a Linkedid chain", strings.Join(ids, ", "),
				"no attended transfer joined them: a pickup or a dialled channel is one call")
		}
	}
	answeredChain := map[string]bool{}
	for lid := range chainAnswer {
		answeredChain[chains.root(lid)] = true
	}
	for _, id := range order {
		c := logs[id]
		r := chains.root(id)
		end := chainEnd[r]
		switch {
		case c.ended == 0 && end >= 0:
			add("never ended", id, "its last channel (Linkedid chain %s) was gone at message %d (%s); events: %s",
				r, end, msgs[end].Event(), typesOf(c.events))
		case c.ended == 0:
			add("capture ends with the call open", id, "channels still up at the end of the capture")
		case end >= 0 && c.endedAt > end:
			add("ended late", id, "call_ended at message %d, its chain's last channel was gone at %d", c.endedAt, end)
		case c.endedAt < end || end < 0:
			// Before the chain's end: only for a call whose own channels are all gone, or one an
			// attended transfer, a pickup or a Linkedid change joined to another.
			own, ok := lastOf[id]
			if !(ok && own == c.endedAt) && !joinAt[fmt.Sprint(id, "/", c.endedAt)] {
				add("ended early", id, "call_ended at message %d (%s) while its channels are still up (chain ends at %d)",
					c.endedAt, msgs[c.endedAt].Event(), end)
			}
		}
		if c.answered && !answeredChain[r] {
			add("answered without an answer", id, "call_answered, but no DialEnd ANSWER to a phone or trunk nor a Pickup in its Linkedid chain")
		}
		for _, i := range answerIn[id] {
			if (c.endedAt < 0 || i < c.endedAt) && !c.answered && !endedAnswered(c) {
				add("answer not reported", id, "DialEnd ANSWER at message %d (%s), but the call is not answered: %s",
					i, msgs[i].Get("DestChannel"), typesOf(c.events))
				break
			}
		}
	}
	return len(order), vs
}

func endedAnswered(c *callLog) bool {
	for _, e := range c.events {
		if e.Type == event.CallEnded {
			return e.Disposition == event.DispositionAnswered
		}
	}
	return false
}

func typesOf(evs []event.Event) string {
	var s []string
	for _, e := range evs {
		t := string(e.Type)
		if e.Disposition != "" {
			t += "(" + string(e.Disposition) + ")"
		}
		s = append(s, t)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// loadCapture reads one capture: AMI wire form (`.ami`) or a JSON array of event objects
// (`.json`, Cacofonisk's recorder: keys sorted, plus an empty `content` key its AMI library
// adds). A JSON event becomes a message with Event first and the other keys in file order.
func loadCapture(t testing.TB, path string) []ami.Message {
	t.Helper()
	if strings.HasSuffix(path, ".ami") {
		return load(t, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		t.Fatalf("%s: not a JSON array of events", path)
	}
	var out []ami.Message
	for dec.More() {
		m, err := jsonEvent(dec)
		if err != nil {
			t.Fatalf("%s: event %d: %v", path, len(out), err)
		}
		out = append(out, m)
	}
	return out
}

// jsonEvent reads one JSON object of string values as an AMI message, keeping the key order.
func jsonEvent(dec *json.Decoder) (ami.Message, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ami.Message{}, fmt.Errorf("not an object (%v)", err)
	}
	var kv []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ami.Message{}, fmt.Errorf("reading a key: %w", err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return ami.Message{}, fmt.Errorf("reading %v: %w", k, err)
		}
		key, _ := k.(string)
		if key == "content" {
			continue
		}
		kv = append(kv, key, fmt.Sprint(v))
	}
	if _, err := dec.Token(); err != nil {
		return ami.Message{}, fmt.Errorf("closing the object: %w", err)
	}
	m := ami.NewMessage()
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "Event" {
			m.Add(kv[i], kv[i+1])
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] != "Event" {
			m.Add(kv[i], kv[i+1])
		}
	}
	return m, nil
}

// committedCaptures are every capture the repository commits: the real recordings, the
// synthetic stream and the regression captures of testdata/regress.
func committedCaptures(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"ami/testdata", "testdata/synthetic", "testdata/regress"} {
		ps, err := filepath.Glob(filepath.Join(dir, "*.ami"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ps...)
	}
	return out
}

// TestInvariants checks the call invariants (see replayChecked) on every capture the repository
// commits, so they hold without the public corpus too.
func TestInvariants(t *testing.T) {
	paths := committedCaptures(t)
	if len(paths) < 22 {
		t.Fatalf("only %d committed captures found", len(paths))
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".ami"), func(t *testing.T) {
			_, vs := replayChecked(t, p, loadCapture(t, p))
			for _, v := range vs {
				t.Error(v)
			}
		})
	}
}

// TestPublicCorpusInvariants replays every capture of a public AMI corpus (CALLWIRE_TEST_AMI_CORPUS,
// else ../shared/corpus/ami beside the repository) through the Tracker and checks the call
// invariants on every call. Without a corpus it skips, saying what to set.
func TestPublicCorpusInvariants(t *testing.T) {
	dir := os.Getenv(corpusEnv)
	if dir == "" {
		dir = defaultCorpus
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skipf("SKIPPED: no public AMI corpus at %q: set %s to a directory of AMI captures "+
			"(*.ami, or Cacofonisk's tests/fixtures/**/*.json) to check the call invariants on them; see docs/asterisk.md", dir, corpusEnv)
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".ami") || strings.HasSuffix(p, ".json")) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("%s names %q, which holds no *.ami or *.json capture", corpusEnv, dir)
	}
	calls, bad := 0, 0
	classes := map[string]int{}
	for _, p := range paths {
		name, _ := filepath.Rel(dir, p)
		n, vs := replayChecked(t, name, loadCapture(t, p))
		calls += n
		if len(vs) > 0 {
			bad++
		}
		for _, v := range vs {
			classes[v.class]++
			t.Error(v)
		}
	}
	t.Logf("%d captures, %d calls replayed; %d captures with violations %v", len(paths), calls, bad, classes)
}
