package service

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// errLenientUnsupported is returned for message shapes the lenient decoder does not handle (map
// and group fields, which no sharecoord.v1 request has).
var errLenientUnsupported = errors.New("map and group fields are not supported")

// lenientMaxDepth bounds message nesting, as protobuf's default recursion limit does.
const lenientMaxDepth = 10000

// unmarshalLenient merges the wire-format message b into m exactly as proto.Unmarshal does,
// except that string fields keep their bytes even when they are not valid UTF-8. Malformed wire
// data (truncated values, bad tags, bad field numbers, unbalanced groups) is refused as protobuf
// refuses it. Field values whose wire type does not match the field are kept as unknown fields,
// as protobuf keeps them.
func unmarshalLenient(b []byte, m protoreflect.Message) error {
	return decodeMessage(b, m, lenientMaxDepth)
}

func decodeMessage(b []byte, m protoreflect.Message, depth int) error {
	if depth <= 0 {
		return errors.New("exceeded maximum recursion depth")
	}
	fields := m.Descriptor().Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("field number %d out of range", num)
		}
		if typ == protowire.EndGroupType {
			return fmt.Errorf("unexpected end of group %d", num)
		}
		b = b[n:]
		used := -1 // bytes of the value consumed as a known field; -1: keep it as unknown
		if fd := fields.ByNumber(num); fd != nil {
			var err error
			if used, err = decodeField(b, m, fd, typ, depth); err != nil {
				return fmt.Errorf("field %s: %w", fd.Name(), err)
			}
		}
		if used < 0 {
			used = protowire.ConsumeFieldValue(num, typ, b)
			if used < 0 {
				return protowire.ParseError(used)
			}
			// Kept with the tag re-encoded in its shortest form, as protobuf keeps it.
			unknown := protowire.AppendTag(m.GetUnknown(), num, typ)
			m.SetUnknown(append(unknown, b[:used]...))
		}
		b = b[used:]
	}
	return nil
}

// decodeField decodes one value of field fd from b (after its tag) into m and returns the bytes
// consumed, or -1 when the wire type does not fit the field (the value is then an unknown field).
func decodeField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, typ protowire.Type, depth int) (int, error) {
	if fd.IsMap() || fd.Kind() == protoreflect.GroupKind {
		return 0, errLenientUnsupported
	}
	switch fd.Kind() {
	case protoreflect.MessageKind:
		if typ != protowire.BytesType {
			return -1, nil
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		if fd.IsList() {
			list := m.Mutable(fd).List()
			elem := list.NewElement()
			if err := decodeMessage(v, elem.Message(), depth-1); err != nil {
				return 0, err
			}
			list.Append(elem)
			return n, nil
		}
		return n, decodeMessage(v, m.Mutable(fd).Message(), depth-1)
	case protoreflect.StringKind, protoreflect.BytesKind:
		if typ != protowire.BytesType {
			return -1, nil
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		val := protoreflect.ValueOfString(string(v))
		if fd.Kind() == protoreflect.BytesKind {
			val = protoreflect.ValueOfBytes(append([]byte{}, v...))
		}
		setOrAppend(m, fd, val)
		return n, nil
	}
	// A scalar: one value in its own wire type, or, for a repeated field, a packed run of them.
	if fd.IsList() && typ == protowire.BytesType {
		run, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		want := scalarWireType(fd.Kind())
		list := m.Mutable(fd).List()
		for len(run) > 0 {
			v, k := consumeScalar(run, fd.Kind(), want)
			if k < 0 {
				return 0, protowire.ParseError(k)
			}
			list.Append(v)
			run = run[k:]
		}
		return n, nil
	}
	if typ != scalarWireType(fd.Kind()) {
		return -1, nil
	}
	v, n := consumeScalar(b, fd.Kind(), typ)
	if n < 0 {
		return 0, protowire.ParseError(n)
	}
	setOrAppend(m, fd, v)
	return n, nil
}

func setOrAppend(m protoreflect.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	if fd.IsList() {
		m.Mutable(fd).List().Append(v)
		return
	}
	m.Set(fd, v)
}

// scalarWireType is the wire type of a scalar kind.
func scalarWireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	}
	return protowire.VarintType
}

// consumeScalar decodes one scalar of kind k in wire type typ, with protobuf's conversions
// (32-bit kinds keep the low 32 bits of a varint).
func consumeScalar(b []byte, k protoreflect.Kind, typ protowire.Type) (protoreflect.Value, int) {
	switch typ {
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		switch k {
		case protoreflect.Sfixed32Kind:
			return protoreflect.ValueOfInt32(int32(v)), n
		case protoreflect.FloatKind:
			return protoreflect.ValueOfFloat32(math.Float32frombits(v)), n
		}
		return protoreflect.ValueOfUint32(v), n
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		switch k {
		case protoreflect.Sfixed64Kind:
			return protoreflect.ValueOfInt64(int64(v)), n
		case protoreflect.DoubleKind:
			return protoreflect.ValueOfFloat64(math.Float64frombits(v)), n
		}
		return protoreflect.ValueOfUint64(v), n
	}
	v, n := protowire.ConsumeVarint(b)
	switch k {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(protowire.DecodeBool(v)), n
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(v))), n
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(v)), n
	case protoreflect.Sint32Kind:
		return protoreflect.ValueOfInt32(int32(protowire.DecodeZigZag(v & math.MaxUint32))), n
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(v)), n
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(v)), n
	case protoreflect.Sint64Kind:
		return protoreflect.ValueOfInt64(protowire.DecodeZigZag(v)), n
	}
	return protoreflect.ValueOfUint64(v), n
}
