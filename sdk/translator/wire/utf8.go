package wire

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// replacementChar stands in for each run of bytes that is not UTF-8 in a string sent over the
// protocol.
const replacementChar = "\uFFFD"

// ValidUTF8 makes every string field of m, at any depth, valid UTF-8, replacing each invalid run
// of bytes with U+FFFD, and returns m. proto3 strings must be UTF-8: a message holding anything
// else cannot be marshalled, and gRPC then ends the whole Run stream, so that one translator's
// error text (or a sink's) would cost the run and hide the text itself. Both sides call it on
// every message just before sending it, so a string field added to the protocol later is covered
// too. Bytes fields (the configuration, the event JSON) are left as they are.
func ValidUTF8[M proto.Message](m M) M {
	fixMessage(m.ProtoReflect())
	return m
}

func fixMessage(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			fixList(fd, v.List())
		case fd.IsMap():
			fixMap(fd, v.Map())
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				m.Set(fd, protoreflect.ValueOfString(strings.ToValidUTF8(s, replacementChar)))
			}
		case fd.Message() != nil:
			fixMessage(v.Message())
		}
		return true
	})
}

func fixList(fd protoreflect.FieldDescriptor, l protoreflect.List) {
	for i := range l.Len() {
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if s := l.Get(i).String(); !utf8.ValidString(s) {
				l.Set(i, protoreflect.ValueOfString(strings.ToValidUTF8(s, replacementChar)))
			}
		case fd.Message() != nil:
			fixMessage(l.Get(i).Message())
		}
	}
}

func fixMap(fd protoreflect.FieldDescriptor, m protoreflect.Map) {
	type entry struct {
		k protoreflect.MapKey
		v protoreflect.Value
	}
	var rekey []entry
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		switch {
		case fd.MapValue().Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				v = protoreflect.ValueOfString(strings.ToValidUTF8(s, replacementChar))
				m.Set(k, v)
			}
		case fd.MapValue().Message() != nil:
			fixMessage(v.Message())
		}
		if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
			rekey = append(rekey, entry{k, v})
		}
		return true
	})
	// Keys are changed after the walk; two keys that differ only in their invalid bytes become
	// one, the later in the walk's (undefined) order winning.
	for _, e := range rekey {
		m.Clear(e.k)
		fixed := strings.ToValidUTF8(e.k.String(), replacementChar)
		m.Set(protoreflect.ValueOfString(fixed).MapKey(), e.v)
	}
}
