package hep

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrTooLarge is wrapped by Append and Encode when a packet would be longer than
// MaxPacketLen, or one of its byte fields longer than a chunk can hold.
var ErrTooLarge = errors.New("hep packet too large")

// Encode returns p as a HEPv3 packet. See Append.
func Encode(p *Packet) ([]byte, error) {
	return Append(nil, p)
}

// Append appends p as one HEPv3 packet to dst and returns the extended slice.
// It writes a chunk for each field that is not its zero value (an address only
// when valid: an IPv4 address as chunk 0x03/0x04, any other, IPv4-mapped ones too, as
// 0x05/0x06), in chunk-type order, so Decode(Append(nil, p)) equals p for any p
// Decode can return. On error dst is returned unchanged.
func Append(dst []byte, p *Packet) ([]byte, error) {
	start := len(dst)
	dst = append(dst, Magic...)
	dst = append(dst, 0, 0) // the length, set below
	u8 := func(typ uint16, v uint8) {
		if v != 0 {
			dst = appendChunkHeader(dst, typ, 1)
			dst = append(dst, v)
		}
	}
	u16 := func(typ uint16, v uint16) {
		if v != 0 {
			dst = appendChunkHeader(dst, typ, 2)
			dst = binary.BigEndian.AppendUint16(dst, v)
		}
	}
	u32 := func(typ uint16, v uint32) {
		if v != 0 {
			dst = appendChunkHeader(dst, typ, 4)
			dst = binary.BigEndian.AppendUint32(dst, v)
		}
	}
	var tooLong error
	bytes := func(typ uint16, v []byte) {
		if v == nil {
			return
		}
		if len(v) > MaxPacketLen-HeaderLen-chunkHeaderLen {
			tooLong = fmt.Errorf("%w: chunk 0x%02x of %d bytes", ErrTooLarge, typ, len(v))
			return
		}
		dst = appendChunkHeader(dst, typ, len(v))
		dst = append(dst, v...)
	}
	u8(ChunkIPFamily, p.Family)
	u8(ChunkIPProtocol, p.IPProtocol)
	if p.Src.Is4() {
		dst = appendChunkHeader(dst, ChunkIPv4Src, 4)
		a := p.Src.As4()
		dst = append(dst, a[:]...)
	}
	if p.Dst.Is4() {
		dst = appendChunkHeader(dst, ChunkIPv4Dst, 4)
		a := p.Dst.As4()
		dst = append(dst, a[:]...)
	}
	if p.Src.IsValid() && !p.Src.Is4() {
		dst = appendChunkHeader(dst, ChunkIPv6Src, 16)
		a := p.Src.As16()
		dst = append(dst, a[:]...)
	}
	if p.Dst.IsValid() && !p.Dst.Is4() {
		dst = appendChunkHeader(dst, ChunkIPv6Dst, 16)
		a := p.Dst.As16()
		dst = append(dst, a[:]...)
	}
	u16(ChunkSrcPort, p.SrcPort)
	u16(ChunkDstPort, p.DstPort)
	u32(ChunkTimeSeconds, p.Seconds)
	u32(ChunkTimeMicros, p.Micros)
	u8(ChunkProtoType, p.ProtoType)
	u32(ChunkCaptureID, p.CaptureID)
	u16(ChunkKeepAlive, p.KeepAlive)
	bytes(ChunkAuthKey, p.AuthKey)
	bytes(ChunkPayload, p.Payload)
	bytes(ChunkCorrelationID, p.CorrelationID)
	u16(ChunkVLAN, p.VLAN)
	bytes(ChunkNodeName, p.NodeName)
	if tooLong != nil {
		return dst[:start], tooLong
	}
	n := len(dst) - start
	if n > MaxPacketLen {
		return dst[:start], fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, n, MaxPacketLen)
	}
	binary.BigEndian.PutUint16(dst[start+4:], uint16(n))
	return dst, nil
}

func appendChunkHeader(dst []byte, typ uint16, valueLen int) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, typ)
	return binary.BigEndian.AppendUint16(dst, uint16(chunkHeaderLen+valueLen))
}
