package plugins

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/callwire/callwire/plugins/internal/proto"
	"github.com/callwire/callwire/sdk/event"
)

// The string fields of the protocol, and which side fills each. Every one may carry a text that
// is not UTF-8 (an error's text, a sink's refusal), and validUTF8 repairs each before it is sent.
// TestProtocolStringFields fails when the protocol gains or loses a string field, so that this
// table, and what docs/writing-a-translator.md says about it, stay true.
var protocolStringFields = []struct {
	name, filledBy string
}{
	{"callwire.plugins.v1.Ack.error", "host: the sink's refusal, or why the event is invalid"},
	{"callwire.plugins.v1.Problem.field", "host: the JSON path of an invalid field"},
	{"callwire.plugins.v1.Problem.message", "host: what is wrong with it"},
	{"callwire.plugins.v1.Done.error", "translator: the error its Run returned"},
	{"callwire.plugins.v1.HealthResponse.error", "translator: the error its Health returned"},
}

// stringFields lists the string fields of every message of the protocol, by full name.
func stringFields() []string {
	var out []string
	msgs := pb.File_translator_proto.Messages()
	for i := range msgs.Len() {
		fields := msgs.Get(i).Fields()
		for j := range fields.Len() {
			if fd := fields.Get(j); fd.Kind() == protoreflect.StringKind {
				out = append(out, string(fd.FullName()))
			}
		}
	}
	return out
}

func TestProtocolStringFields(t *testing.T) {
	var want []string
	for _, f := range protocolStringFields {
		want = append(want, f.name)
	}
	got := stringFields()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the protocol's string fields are %q; the table lists %q", got, want)
	}
}

// fill sets field fd of m, and every field of the messages under it, to text (strings) or a
// value of its kind, so that each string at any depth holds text.
func fill(m protoreflect.Message, fd protoreflect.FieldDescriptor, text string) {
	value := func(v protoreflect.Value) protoreflect.Value {
		switch {
		case fd.Kind() == protoreflect.StringKind:
			return protoreflect.ValueOfString(text)
		case fd.Message() != nil:
			sub := v.Message()
			fields := sub.Descriptor().Fields()
			for i := range fields.Len() {
				fill(sub, fields.Get(i), text)
			}
			return v
		}
		return fd.Default()
	}
	if fd.IsList() {
		l := m.Mutable(fd).List()
		l.Append(value(l.NewElement()))
		l.Append(value(l.NewElement()))
		return
	}
	m.Set(fd, value(m.NewField(fd)))
}

// TestValidUTF8RepairsEveryStringField sends, through each field of each message of the
// protocol in turn, a text that is not UTF-8, and checks that the message then marshals with the
// text repaired, at every depth, and nothing else changed.
func TestValidUTF8RepairsEveryStringField(t *testing.T) {
	const bad, repaired = "\xff\xfe bad \xc3", "\uFFFD bad \uFFFD"
	msgs := pb.File_translator_proto.Messages()
	for i := range msgs.Len() {
		md := msgs.Get(i)
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
		if err != nil {
			t.Fatalf("%s: %v", md.FullName(), err)
		}
		for j := range md.Fields().Len() {
			fd := md.Fields().Get(j)
			t.Run(string(fd.FullName()), func(t *testing.T) {
				m, want := mt.New(), mt.New()
				fill(m, fd, bad)
				fill(want, fd, repaired)
				carriesText := !proto.Equal(m.Interface(), want.Interface())
				if _, err := proto.Marshal(m.Interface()); carriesText && err == nil {
					t.Fatalf("a message with invalid UTF-8 in %s marshalled before being repaired", fd.Name())
				}
				got := validUTF8(m.Interface())
				data, err := proto.Marshal(got)
				if err != nil {
					t.Fatalf("marshal after validUTF8: %v", err)
				}
				if !proto.Equal(got, want.Interface()) {
					t.Errorf("validUTF8 gave %v, want %v", got, want.Interface())
				}
				back := mt.New().Interface()
				if err := proto.Unmarshal(data, back); err != nil || !proto.Equal(back, want.Interface()) {
					t.Errorf("the far side read %v (%v), want %v", back, err, want.Interface())
				}
			})
		}
	}
}

// TestValidUTF8RepairsListsAndMaps covers the shapes the protocol has no string field of yet: a
// map with string keys and values, and strings in lists and oneofs under it.
func TestValidUTF8RepairsListsAndMaps(t *testing.T) {
	m := &structpb.Struct{Fields: map[string]*structpb.Value{
		"ok":      structpb.NewStringValue("fine"),
		"\xffkey": structpb.NewStringValue("\xfevalue"),
		"list": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
			structpb.NewStringValue("\xff"),
			structpb.NewStringValue("plain"),
			structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"deep": structpb.NewStringValue("\xc3(")}}),
		}}),
		"number\xc3": structpb.NewNumberValue(1.5),
	}}
	want := &structpb.Struct{Fields: map[string]*structpb.Value{
		"ok":        structpb.NewStringValue("fine"),
		"\uFFFDkey": structpb.NewStringValue("\uFFFDvalue"),
		"list": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
			structpb.NewStringValue("\uFFFD"),
			structpb.NewStringValue("plain"),
			structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"deep": structpb.NewStringValue("\uFFFD(")}}),
		}}),
		"number\uFFFD": structpb.NewNumberValue(1.5),
	}}
	if _, err := proto.Marshal(m); err == nil {
		t.Fatal("a map with invalid UTF-8 marshalled before being repaired")
	}
	if got := validUTF8(m); !proto.Equal(got, want) {
		t.Errorf("validUTF8 gave %v, want %v", got, want)
	}
	if _, err := proto.Marshal(m); err != nil {
		t.Errorf("marshal after validUTF8: %v", err)
	}
}

// FuzzValidUTF8 sends arbitrary texts through the host's Ack and the translator's Done, the way
// the adapters do: the message always marshals, the far side reads each text with only its
// invalid bytes replaced, and what Emit returns for the Ack carries the repaired text.
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "outbox full", "\xff\xfe bad", "caf\xc3", "日本\xe6\x97", "\x00\x80"} {
		f.Add(s, "call.direction", s)
	}
	f.Fuzz(func(t *testing.T, text, field, message string) {
		ack := validUTF8(&pb.HostMessage{Msg: &pb.HostMessage_Ack{Ack: &pb.Ack{
			Id: 7, Error: text, Problems: []*pb.Problem{{Field: field, Message: message}},
		}}})
		done := validUTF8(&pb.TranslatorMessage{Msg: &pb.TranslatorMessage_Done{Done: &pb.Done{Error: text}}})
		for _, sent := range []proto.Message{ack, done} {
			data, err := proto.Marshal(sent)
			if err != nil {
				t.Fatalf("marshal %v: %v", sent, err)
			}
			back := sent.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(data, back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(back, sent) {
				t.Fatalf("sent %v, read %v", sent, back)
			}
		}
		fixed := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		if got := done.GetDone().GetError(); got != fixed(text) || (utf8.ValidString(text) && got != text) {
			t.Errorf("Done.error %q became %q", text, got)
		}
		err := ackError(ack.GetAck())
		var ve *event.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 {
			t.Fatalf("ackError = %v, want the problem", err)
		}
		if p := ve.Problems[0]; p.Field != fixed(field) || p.Message != fixed(message) {
			t.Errorf("problem %q: %q became %q: %q", field, message, p.Field, p.Message)
		}
		ack.GetAck().Problems = nil
		var refused *RefusedError
		switch err := ackError(ack.GetAck()); {
		case text == "" && err != nil:
			t.Errorf("an empty error became %v", err)
		case text != "" && (!errors.As(err, &refused) || refused.Reason != fixed(text)):
			t.Errorf("Ack.error %q became %v", text, err)
		}
	})
}
