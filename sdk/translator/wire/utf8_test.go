package wire

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
)

// The string fields of the protocol, and which side fills each. Every one may carry a text that
// is not UTF-8 (an error's text, a sink's refusal), and ValidUTF8 repairs each before it is sent.
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
	msgs := File_translator_proto.Messages()
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
	msgs := File_translator_proto.Messages()
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
				got := ValidUTF8(m.Interface())
				data, err := proto.Marshal(got)
				if err != nil {
					t.Fatalf("marshal after ValidUTF8: %v", err)
				}
				if !proto.Equal(got, want.Interface()) {
					t.Errorf("ValidUTF8 gave %v, want %v", got, want.Interface())
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
	if got := ValidUTF8(m); !proto.Equal(got, want) {
		t.Errorf("ValidUTF8 gave %v, want %v", got, want)
	}
	if _, err := proto.Marshal(m); err != nil {
		t.Errorf("marshal after ValidUTF8: %v", err)
	}
}
