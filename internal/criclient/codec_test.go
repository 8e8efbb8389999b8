package criclient

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// recordingPool is a buffer pool that records the sizes asked of it and
// how many buffers came back.
type recordingPool struct {
	base mem.BufferPool

	mu   sync.Mutex
	gets []int
	puts int
}

func (p *recordingPool) Get(n int) *[]byte {
	p.mu.Lock()
	p.gets = append(p.gets, n)
	p.mu.Unlock()
	return p.base.Get(n)
}

func (p *recordingPool) Put(b *[]byte) {
	p.mu.Lock()
	p.puts++
	p.mu.Unlock()
	p.base.Put(b)
}

func (p *recordingPool) sizes() ([]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.gets), p.puts
}

// listOf is a ListContainers response of n containers with long ids, about
// 100 bytes each.
func listOf(n int) *runtimeapi.ListContainersResponse {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range n {
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id:           fmt.Sprintf("%064d", i),
			PodSandboxId: fmt.Sprintf("%064d", n+i),
			State:        runtimeapi.ContainerState_CONTAINER_RUNNING,
		})
	}
	return resp
}

func TestCodecJoinsBuffersInItsPool(t *testing.T) {
	for _, tt := range []struct {
		name     string
		pieces   int // the encoded message split in this many buffers
		wantGets int
	}{
		{"one buffer is read in place", 1, 0},
		{"several are joined in one of the pool", 5, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := listOf(500)
			data, err := protobuf.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			var slice mem.BufferSlice
			step := (len(data) + tt.pieces - 1) / tt.pieces
			for off := 0; off < len(data); off += step {
				slice = append(slice, mem.SliceBuffer(data[off:min(off+step, len(data))]))
			}
			if len(slice) != tt.pieces {
				t.Fatalf("split in %d buffers, want %d", len(slice), tt.pieces)
			}
			pool := &recordingPool{base: mem.DefaultBufferPool()}
			got := &runtimeapi.ListContainersResponse{}
			if err := newCodec(pool).Unmarshal(slice, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !protobuf.Equal(got, want) {
				t.Fatalf("decoded %d containers, not the %d encoded", len(got.Containers), len(want.Containers))
			}
			gets, puts := pool.sizes()
			if len(gets) != tt.wantGets || puts != tt.wantGets {
				t.Fatalf("pool: %d gets (sizes %v), %d puts; want %d of each", len(gets), gets, puts, tt.wantGets)
			}
			if tt.wantGets > 0 && gets[0] != len(data) {
				t.Fatalf("pool asked for %d bytes, want the message's %d", gets[0], len(data))
			}
		})
	}
}

// TestResponsesJoinedInTheClientsPool checks the connection's codec: a
// response of many HTTP/2 frames is joined in a buffer of the client's
// pool, of its own size, not in gRPC's default pool (1 MiB buffers).
func TestResponsesJoinedInTheClientsPool(t *testing.T) {
	pool := &recordingPool{base: bufferPool}
	saved := bufferPool
	bufferPool = pool
	t.Cleanup(func() { bufferPool = saved })

	want := listOf(2000)
	size := protobuf.Size(want)
	f := &fake{unary: map[string]unaryFunc{"ListContainers": answer(want)}}
	rs, _ := f.clients(t, 5*time.Second)
	got, err := rs.ListContainers(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	if len(got) != len(want.Containers) {
		t.Fatalf("ListContainers returned %d containers, want %d", len(got), len(want.Containers))
	}
	gets, _ := pool.sizes()
	if !slices.Contains(gets, size) {
		t.Fatalf("the client's pool was never asked for the %d-byte response (sizes asked: %v)", size, gets)
	}
}
