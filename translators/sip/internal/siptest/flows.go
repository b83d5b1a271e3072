package siptest

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// Flow is one sipp scenario pair of testdata/sipp: UAC is the side that places the call (run with
// the remote address on its command line), UAS the side that answers.
//
// For every flow but one the UAC is the carrier trunk and the UAS the clinic's PBX. In the flow
// named "outbound" the PBX places the call: its UAC is the PBX and its UAS the trunk. A test that
// puts the proxy between the two sides names the PBX by PBXPort: the UAS port of an inbound flow,
// the UAC port of an outbound one.
type Flow struct {
	Name     string // the file names' stem: <Name>_uac.xml and <Name>_uas.xml
	UAC, UAS string // absolute paths of the two scenario files
	Outbound bool   // the UAC is the PBX (the call goes out to the trunk)
	Shows    string // what the flow shows: the opening comment of its caller side, on one line
}

// PBXPort is the port of the side that plays the PBX in a prepared Pair of this flow.
func (f Flow) PBXPort(p Pair) int {
	if f.Outbound {
		return p.UACPort
	}
	return p.UASPort
}

// TrunkPort is the port of the side that plays the carrier trunk in a prepared Pair of this flow.
func (f Flow) TrunkPort(p Pair) int {
	if f.Outbound {
		return p.UASPort
	}
	return p.UACPort
}

// Pair returns a Pair that runs this flow's two scenarios, with the given number of calls and
// transport and every other field at its default.
func (f Flow) Pair(calls int, tr Transport) Pair {
	return Pair{UAC: f.UAC, UAS: f.UAS, Calls: calls, Transport: tr}
}

// Capture is the path of this flow's committed HEP capture (which may not exist yet).
func (f Flow) Capture() string { return filepath.Join(CaptureDir(), f.Name+".hep") }

// testdataDir is translators/sip/testdata, found from this source file so that tests of any
// package can call it whatever their working directory.
func testdataDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("..", "..", "testdata")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// ScenarioDir is the absolute path of translators/sip/testdata/sipp.
func ScenarioDir() string { return filepath.Join(testdataDir(), "sipp") }

// CaptureDir is the absolute path of translators/sip/testdata/captures.
func CaptureDir() string { return filepath.Join(testdataDir(), "captures") }

// Flows lists every scenario pair of ScenarioDir, sorted by name. It fails the test when a caller
// side has no callee side or the directory holds no pair.
func Flows(t testing.TB) []Flow {
	t.Helper()
	uacs, err := filepath.Glob(filepath.Join(ScenarioDir(), "*_uac.xml"))
	if err != nil || len(uacs) == 0 {
		t.Fatalf("no scenario pairs in %s: %v", ScenarioDir(), err)
	}
	out := make([]Flow, 0, len(uacs))
	for _, uac := range uacs {
		name := strings.TrimSuffix(filepath.Base(uac), "_uac.xml")
		uas := filepath.Join(ScenarioDir(), name+"_uas.xml")
		if _, err := os.Stat(uas); err != nil {
			t.Fatalf("flow %s has no callee side: %v", name, err)
		}
		out = append(out, Flow{Name: name, UAC: uac, UAS: uas, Outbound: name == "outbound", Shows: shows(uac)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FlowNamed returns the flow of that name, failing the test when there is none.
func FlowNamed(t testing.TB, name string) Flow {
	t.Helper()
	for _, f := range Flows(t) {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no sipp flow named %q in %s", name, ScenarioDir())
	return Flow{}
}

// shows reads what a scenario's opening comment says the flow shows: the text after its first
// colon ("<!-- flow, caller side (who): what it shows -->"), whitespace collapsed. It is empty when
// the file has no such comment.
func shows(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	_, c, ok := strings.Cut(string(b), "<!--")
	if !ok {
		return ""
	}
	c, _, _ = strings.Cut(c, "-->")
	if _, after, ok := strings.Cut(c, "): "); ok {
		c = after
	}
	return strings.Join(strings.Fields(c), " ")
}
