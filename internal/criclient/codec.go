package criclient

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// codec is gRPC's proto codec, except where a response arrives in more
// than one buffer (above 16 KiB, one per HTTP/2 data frame): gRPC's codec
// joins them in a buffer of its process-wide default pool, whose size
// after 32 KiB is 1 MiB, kept in the pool after use; the relist's container
// and sandbox lists of a node with 100 pods kept 2 MiB that way. codec
// joins them in a buffer of pool instead, of the response's size class.
// A reply that is a decoder (a full list, see listCache) is decoded by
// itself rather than by the proto codec.
type codec struct {
	base encoding.CodecV2
	pool mem.BufferPool
}

// newCodec returns gRPC's proto codec joining multi-buffer responses in
// buffers of pool.
func newCodec(pool mem.BufferPool) codec {
	return codec{base: encoding.GetCodecV2(proto.Name), pool: pool}
}

func (c codec) Name() string { return c.base.Name() }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

// Unmarshal decodes data into v. The base codec reads a single buffer in
// place; several are copied into one from c.pool first, freed (returned to
// the pool) when v is decoded: the proto decoder copies what it keeps.
// A decoder (a full list through its listCache) decodes itself from the
// same single buffer.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	d, own := v.(decoder)
	if len(data) <= 1 {
		if own {
			var b []byte
			if len(data) == 1 {
				b = data[0].ReadOnlyData()
			}
			return d.decode(b)
		}
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	if own {
		return d.decode(buf.ReadOnlyData())
	}
	return c.base.Unmarshal(mem.BufferSlice{buf}, v)
}
