// Package hep decodes and encodes HEPv3 (also called EEP), the encapsulation in
// which Kamailio and OpenSIPS siptrace, Asterisk res_hep, FreeSWITCH's capture
// server and heplify send copies of SIP messages to a collector. It is the wire
// layer of the SIP observer's passive tap (mode hep): stdlib only, no I/O but the
// TCP framing in Reader, and no panics on any input.
//
// A HEPv3 packet is the magic "HEP3", a 16-bit big-endian total length (header
// included), then chunks, each a 16-bit vendor id, a 16-bit type id, a 16-bit
// length (its own 6-byte header included) and a value. Decode reads the generic
// chunks (vendor 0) of types 0x01 to 0x13 and skips any other chunk, vendor
// chunks and unknown types alike, after checking that it fits.
//
// Decode returns slices into the bytes it was given (see Packet); Packet.Clone
// makes a copy that outlives them.
package hep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Magic is the four bytes every HEPv3 packet starts with.
const Magic = "HEP3"

// HeaderLen is the length of a HEPv3 packet's header: Magic and the total length.
const HeaderLen = 6

// chunkHeaderLen is the length of a chunk's vendor id, type id and length.
const chunkHeaderLen = 6

// MaxPacketLen is the largest HEPv3 packet there can be: its length is a 16-bit field.
const MaxPacketLen = 0xffff

// Generic chunk types (vendor 0) this package knows.
const (
	ChunkIPFamily          = 0x01 // uint8: 2 IPv4, 10 IPv6
	ChunkIPProtocol        = 0x02 // uint8: the IP protocol number (17 UDP, 6 TCP, 132 SCTP)
	ChunkIPv4Src           = 0x03 // 4 bytes
	ChunkIPv4Dst           = 0x04 // 4 bytes
	ChunkIPv6Src           = 0x05 // 16 bytes
	ChunkIPv6Dst           = 0x06 // 16 bytes
	ChunkSrcPort           = 0x07 // uint16
	ChunkDstPort           = 0x08 // uint16
	ChunkTimeSeconds       = 0x09 // uint32, Unix seconds
	ChunkTimeMicros        = 0x0a // uint32, microseconds within the second
	ChunkProtoType         = 0x0b // uint8: what the payload is (1 SIP)
	ChunkCaptureID         = 0x0c // uint32, the capture agent's id
	ChunkKeepAlive         = 0x0d // uint16, keep-alive timer in seconds
	ChunkAuthKey           = 0x0e // bytes, a shared secret
	ChunkPayload           = 0x0f // bytes, the captured message
	ChunkCompressedPayload = 0x10 // bytes, the captured message compressed (refused)
	ChunkCorrelationID     = 0x11 // bytes
	ChunkVLAN              = 0x12 // uint16
	ChunkNodeName          = 0x13 // bytes, the capture agent's name
)

// IP families as HEP carries them (the Linux AF_ values).
const (
	FamilyIPv4 = 2
	FamilyIPv6 = 10
)

// IP protocol numbers as HEP carries them in ChunkIPProtocol.
const (
	IPProtoTCP  = 6
	IPProtoUDP  = 17
	IPProtoSCTP = 132
)

// ProtoSIP is the ChunkProtoType value of a SIP payload. Other values (5 RTCP,
// 100 logs, ...) are not SIP; Decode reports them in Packet.ProtoType and the
// caller skips them.
const ProtoSIP = 1

// Errors Decode and Reader wrap, so that a caller can count each kind with errors.Is.
var (
	// ErrMalformed: the bytes are not a well-formed HEPv3 packet (bad magic, a
	// length that does not match, a chunk that overruns the packet, a fixed-size
	// chunk of the wrong size, microseconds over a second).
	ErrMalformed = errors.New("malformed hep packet")
	// ErrUnsupported: a well-formed packet this package refuses: HEP versions 1
	// and 2, and compressed payloads (chunk 0x10).
	ErrUnsupported = errors.New("unsupported hep packet")
)

// Packet is one decoded HEPv3 packet. A field whose chunk was absent holds its
// zero value (an invalid netip.Addr for an address, nil for bytes).
//
// AuthKey, Payload, CorrelationID and NodeName are slices into the bytes given to
// Decode: they are valid only as long as those bytes are, and change if the
// caller reuses them (as a UDP read loop or Reader does). Clone copies them.
type Packet struct {
	Family        uint8      // ChunkIPFamily: FamilyIPv4 or FamilyIPv6
	IPProtocol    uint8      // ChunkIPProtocol: IPProtoUDP, IPProtoTCP, IPProtoSCTP
	Src, Dst      netip.Addr // ChunkIPv4Src/Dst or ChunkIPv6Src/Dst, whichever came last
	SrcPort       uint16
	DstPort       uint16
	Seconds       uint32 // ChunkTimeSeconds: when the message was captured, Unix seconds
	Micros        uint32 // ChunkTimeMicros: microseconds within Seconds, below 1,000,000
	ProtoType     uint8  // ChunkProtoType: ProtoSIP, or something to skip
	CaptureID     uint32
	KeepAlive     uint16
	AuthKey       []byte
	Payload       []byte
	CorrelationID []byte
	VLAN          uint16
	NodeName      []byte
}

// IsSIP reports whether the packet says its payload is SIP.
func (p *Packet) IsSIP() bool { return p.ProtoType == ProtoSIP }

// Time returns the capture time the packet carries, in UTC (the zero Unix
// time when the sender sent none).
func (p *Packet) Time() time.Time {
	return time.Unix(int64(p.Seconds), int64(p.Micros)*1000).UTC()
}

// SrcAddrPort returns the captured message's source address and port.
func (p *Packet) SrcAddrPort() netip.AddrPort { return netip.AddrPortFrom(p.Src, p.SrcPort) }

// DstAddrPort returns the captured message's destination address and port.
func (p *Packet) DstAddrPort() netip.AddrPort { return netip.AddrPortFrom(p.Dst, p.DstPort) }

// Clone returns a copy of p that shares no memory with the bytes it was decoded from.
func (p *Packet) Clone() Packet {
	c := *p
	c.AuthKey = cloneBytes(p.AuthKey)
	c.Payload = cloneBytes(p.Payload)
	c.CorrelationID = cloneBytes(p.CorrelationID)
	c.NodeName = cloneBytes(p.NodeName)
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// Decode decodes one whole HEPv3 packet: b must hold exactly the number of bytes
// its header's length says (a UDP datagram, or one packet from Reader). The
// returned Packet's byte fields are slices into b (see Packet). Decode never
// panics and does not allocate; its errors wrap ErrMalformed or ErrUnsupported.
// A packet whose ProtoType is not ProtoSIP is decoded without error: the caller
// decides to skip it.
func Decode(b []byte) (Packet, error) {
	var p Packet
	if err := checkHeader(b); err != nil {
		return p, err
	}
	if n := int(binary.BigEndian.Uint16(b[4:6])); n != len(b) {
		return p, fmt.Errorf("%w: length field says %d bytes, packet has %d", ErrMalformed, n, len(b))
	}
	for off := HeaderLen; off < len(b); {
		rest := b[off:]
		if len(rest) < chunkHeaderLen {
			return Packet{}, fmt.Errorf("%w: %d stray bytes at offset %d, too few for a chunk", ErrMalformed, len(rest), off)
		}
		vendor := binary.BigEndian.Uint16(rest[0:2])
		typ := binary.BigEndian.Uint16(rest[2:4])
		n := int(binary.BigEndian.Uint16(rest[4:6]))
		if n < chunkHeaderLen || n > len(rest) {
			return Packet{}, fmt.Errorf("%w: chunk 0x%02x at offset %d has length %d, %d bytes left", ErrMalformed, typ, off, n, len(rest))
		}
		if vendor == 0 {
			if err := p.setChunk(typ, rest[chunkHeaderLen:n]); err != nil {
				return Packet{}, fmt.Errorf("chunk 0x%02x at offset %d: %w", typ, off, err)
			}
		}
		off += n
	}
	return p, nil
}

// checkHeader checks the magic and that the header is whole, telling HEP
// versions 1 and 2 apart so that they are refused as unsupported, not malformed.
func checkHeader(b []byte) error {
	if len(b) > 0 && (b[0] == 1 || b[0] == 2) {
		return fmt.Errorf("%w: HEP version %d (only HEPv3 is accepted; set the sender to version 3)", ErrUnsupported, b[0])
	}
	if len(b) < HeaderLen {
		return fmt.Errorf("%w: %d bytes, shorter than a header", ErrMalformed, len(b))
	}
	if string(b[:4]) != Magic {
		return fmt.Errorf("%w: does not start with %q", ErrMalformed, Magic)
	}
	return nil
}

// fixedLen is the value length of each fixed-size generic chunk; 0 for a chunk
// of any length or an unknown one.
func fixedLen(typ uint16) int {
	switch typ {
	case ChunkIPFamily, ChunkIPProtocol, ChunkProtoType:
		return 1
	case ChunkSrcPort, ChunkDstPort, ChunkKeepAlive, ChunkVLAN:
		return 2
	case ChunkIPv4Src, ChunkIPv4Dst, ChunkTimeSeconds, ChunkTimeMicros, ChunkCaptureID:
		return 4
	case ChunkIPv6Src, ChunkIPv6Dst:
		return 16
	}
	return 0
}

func (p *Packet) setChunk(typ uint16, v []byte) error {
	if want := fixedLen(typ); want != 0 && len(v) != want {
		return fmt.Errorf("%w: value of %d bytes, want %d", ErrMalformed, len(v), want)
	}
	switch typ {
	case ChunkIPFamily:
		p.Family = v[0]
	case ChunkIPProtocol:
		p.IPProtocol = v[0]
	case ChunkIPv4Src:
		p.Src = netip.AddrFrom4([4]byte(v))
	case ChunkIPv4Dst:
		p.Dst = netip.AddrFrom4([4]byte(v))
	case ChunkIPv6Src:
		p.Src = netip.AddrFrom16([16]byte(v))
	case ChunkIPv6Dst:
		p.Dst = netip.AddrFrom16([16]byte(v))
	case ChunkSrcPort:
		p.SrcPort = binary.BigEndian.Uint16(v)
	case ChunkDstPort:
		p.DstPort = binary.BigEndian.Uint16(v)
	case ChunkTimeSeconds:
		p.Seconds = binary.BigEndian.Uint32(v)
	case ChunkTimeMicros:
		p.Micros = binary.BigEndian.Uint32(v)
		if p.Micros >= 1_000_000 {
			return fmt.Errorf("%w: %d microseconds, a second or more", ErrMalformed, p.Micros)
		}
	case ChunkProtoType:
		p.ProtoType = v[0]
	case ChunkCaptureID:
		p.CaptureID = binary.BigEndian.Uint32(v)
	case ChunkKeepAlive:
		p.KeepAlive = binary.BigEndian.Uint16(v)
	case ChunkAuthKey:
		p.AuthKey = v
	case ChunkPayload:
		p.Payload = v
	case ChunkCompressedPayload:
		return fmt.Errorf("%w: compressed payload; configure the sender to send it uncompressed", ErrUnsupported)
	case ChunkCorrelationID:
		p.CorrelationID = v
	case ChunkVLAN:
		p.VLAN = binary.BigEndian.Uint16(v)
	case ChunkNodeName:
		p.NodeName = v
	}
	return nil
}
