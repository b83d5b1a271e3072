package ami

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestReadMessage(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Message
	}{
		{
			name: "crlf",
			in:   "Event: Newchannel\r\nChannel: PJSIP/101-00000001\r\n\r\n",
			want: []Message{NewMessage("Event", "Newchannel", "Channel", "PJSIP/101-00000001")},
		},
		{
			name: "bare lf",
			in:   "Event: Hangup\nCause: 16\n\n",
			want: []Message{NewMessage("Event", "Hangup", "Cause", "16")},
		},
		{
			name: "mixed line ends and blank lines between messages",
			in:   "\r\n\nEvent: A\r\nX: 1\n\r\n\r\n\nEvent: B\n\n",
			want: []Message{NewMessage("Event", "A", "X", "1"), NewMessage("Event", "B")},
		},
		{
			name: "repeated keys keep their order",
			in:   "Event: VarSet\r\nVariable: a=1\r\nVariable: b=2\r\nVariable: c=3\r\n\r\n",
			want: []Message{NewMessage("Event", "VarSet", "Variable", "a=1", "Variable", "b=2", "Variable", "c=3")},
		},
		{
			name: "colon in value",
			in:   "Event: Newexten\r\nAppData: sip:101@example.org:5060\r\nTimestamp: 12:30:01\r\n\r\n",
			want: []Message{NewMessage("Event", "Newexten", "AppData", "sip:101@example.org:5060", "Timestamp", "12:30:01")},
		},
		{
			name: "empty value and no space after the colon",
			in:   "Event: Newchannel\r\nAccountCode: \r\nCallerIDName:\r\nExten:200\r\n\r\n",
			want: []Message{NewMessage("Event", "Newchannel", "AccountCode", "", "CallerIDName", "", "Exten", "200")},
		},
		{
			name: "spaces around the colon",
			in:   "Event : Hold\r\nChannel:   PJSIP/1 \r\n\r\n",
			want: []Message{NewMessage("Event", "Hold", "Channel", "PJSIP/1 ")},
		},
		{
			name: "command output, legacy Follows",
			in: "Response: Follows\r\nPrivilege: Command\r\nActionID: 7\r\n" +
				"Channel              Location\n" +
				"\n" +
				"PJSIP/101-0001       s@default:1\n" +
				"1 active channel\n--END COMMAND--\r\n\r\n" +
				"Event: After\r\n\r\n",
			want: []Message{
				NewMessage("Response", "Follows", "Privilege", "Command", "ActionID", "7",
					"Output", "Channel              Location", "Output", "",
					"Output", "PJSIP/101-0001       s@default:1", "Output", "1 active channel"),
				NewMessage("Event", "After"),
			},
		},
		{
			name: "command output, end marker after the last line",
			in:   "Response: Follows\r\nActionID: 8\r\nNo such command 'x'--END COMMAND--\r\n\r\n",
			want: []Message{NewMessage("Response", "Follows", "ActionID", "8", "Output", "No such command 'x'")},
		},
		{
			name: "command output, Asterisk 14 and later",
			in:   "Response: Success\r\nActionID: 9\r\nMessage: Command output follows\r\nOutput: line: one\r\nOutput: \r\nOutput: two\r\n\r\n",
			want: []Message{NewMessage("Response", "Success", "ActionID", "9", "Message", "Command output follows",
				"Output", "line: one", "Output", "", "Output", "two")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			for i, want := range tt.want {
				got, err := r.ReadMessage()
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("message %d:\n got %q\nwant %q", i, got.Fields, want.Fields)
				}
			}
			if _, err := r.ReadMessage(); err != io.EOF {
				t.Fatalf("after the last message: err %v, want io.EOF", err)
			}
		})
	}
}

func TestReadMessageErrors(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		in     string
		limits Limits
		want   error
		sticky bool
	}{
		{name: "eof inside a message", in: "Event: A\r\nX: 1\r\n", want: io.ErrUnexpectedEOF, sticky: true},
		{name: "eof inside a line", in: "Event: A\r\nX: 1", want: io.ErrUnexpectedEOF, sticky: true},
		{name: "line too long", in: "Event: " + long + "\r\n\r\n", limits: Limits{MaxLineBytes: 64}, want: ErrLineTooLong, sticky: true},
		{name: "message too large", in: strings.Repeat("K: "+long[:40]+"\r\n", 10) + "\r\n", limits: Limits{MaxLineBytes: 64, MaxMessageBytes: 256}, want: ErrMessageTooLarge, sticky: true},
		{name: "unended command output", in: "Response: Follows\r\n" + strings.Repeat("out\n", 100), limits: Limits{MaxMessageBytes: 128}, want: ErrMessageTooLarge, sticky: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReaderLimits(strings.NewReader(tt.in), tt.limits)
			_, err := r.ReadMessage()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if _, err2 := r.ReadMessage(); tt.sticky && !errors.Is(err2, tt.want) {
				t.Fatalf("second read: err %v, want %v again", err2, tt.want)
			}
		})
	}
}

func TestSyntaxErrorSkipsTheMessage(t *testing.T) {
	r := NewReader(strings.NewReader("Event: A\r\nno colon here\r\n: empty key\r\n\r\nEvent: B\r\n\r\n"))
	_, err := r.ReadMessage()
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != "no colon here" {
		t.Fatalf("err %v, want a SyntaxError of the first bad line", err)
	}
	m, err := r.ReadMessage()
	if err != nil || m.Event() != "B" {
		t.Fatalf("after a syntax error: %v %v, want event B", m, err)
	}
}

func TestReadBanner(t *testing.T) {
	tests := []struct {
		in      string
		version string
		err     error
	}{
		{in: "Asterisk Call Manager/7.0.3\r\n", version: "7.0.3"},
		{in: "Asterisk Call Manager/1.0\n", version: "1.0"},
		{in: "SSH-2.0-OpenSSH_9.6\r\n", err: ErrBanner},
		{in: "Asterisk Call Manager/5.0.1", err: io.ErrUnexpectedEOF},
		{in: "", err: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		r := NewReader(strings.NewReader(tt.in))
		v, err := r.ReadBanner()
		if !errors.Is(err, tt.err) || v != tt.version {
			t.Errorf("ReadBanner(%q) = %q, %v; want %q, %v", tt.in, v, err, tt.version, tt.err)
		}
	}
}

func TestMessageAccessors(t *testing.T) {
	m := NewMessage("Event", "VarSet", "variable", "a", "Variable", "b", "Empty", "")
	if got := m.Get("EVENT"); got != "VarSet" {
		t.Errorf("Get is not case-insensitive: %q", got)
	}
	if got := m.GetAll("VARIABLE"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("GetAll = %q", got)
	}
	if v, ok := m.Lookup("empty"); !ok || v != "" {
		t.Errorf("Lookup(empty) = %q, %v", v, ok)
	}
	if _, ok := m.Lookup("missing"); ok {
		t.Error("Lookup(missing) found something")
	}
	if m.GetAll("missing") != nil {
		t.Error("GetAll(missing) is not nil")
	}
	if s := NewMessage("Action", "Login", "Secret", "hunter2").String(); strings.Contains(s, "hunter2") {
		t.Errorf("String shows the secret: %q", s)
	}
}

func TestAppendMessage(t *testing.T) {
	a := Action{Name: "Originate", ID: "42", Fields: []Field{{"Channel", "PJSIP/101"}, {"Variable", "A=1"}, {"Variable", "B=2"}}}
	got, err := AppendMessage(nil, a.Message())
	if err != nil {
		t.Fatal(err)
	}
	want := "Action: Originate\r\nActionID: 42\r\nChannel: PJSIP/101\r\nVariable: A=1\r\nVariable: B=2\r\n\r\n"
	if string(got) != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	m, err := NewReader(strings.NewReader(string(got))).ReadMessage()
	if err != nil || !reflect.DeepEqual(m, a.Message()) {
		t.Fatalf("read back %v %v", m, err)
	}
	for _, bad := range []Message{
		{},
		NewMessage("Action", "Ping\r\nAction: Logoff"),
		NewMessage("Key:x", "v"),
		NewMessage("", "v"),
		NewMessage(" Key", "v"),
		NewMessage("Key", "a\nb"),
	} {
		if b, err := AppendMessage([]byte("keep"), bad); !errors.Is(err, ErrInvalidField) || string(b) != "keep" {
			t.Errorf("AppendMessage(%q) = %q, %v; want ErrInvalidField and dst unchanged", bad.Fields, b, err)
		}
	}
}
