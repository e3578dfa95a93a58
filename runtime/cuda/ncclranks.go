package cuda

import (
	"fmt"
	"time"

	"tofuc/runtime/executor"
)

// Ranks is the communicator as the ranks' host messages (executor.Ranks:
// their agreement, the outputs gathered on rank 0) for ranks started
// without MPI: each message goes through a buffer of the rank's device,
// uploaded, sent by NCCL and downloaded, every wait bounded by timeout.
// The executor sends host messages only while the device is idle; Close
// frees the buffer.
func (m *Comm) Ranks(timeout time.Duration) executor.Ranks {
	if m.host == nil {
		m.host = &hostOverNCCL{m: m, timeout: timeout}
	}
	return m.host
}

type hostOverNCCL struct {
	m       *Comm
	timeout time.Duration
	buf     executor.Ptr // the device buffer, of size bytes
	size    int64
}

func (h *hostOverNCCL) Rank() int { return h.m.rank }
func (h *hostOverNCCL) Size() int { return h.m.size }

func (h *hostOverNCCL) Send(to int, b []byte) error {
	if err := h.reserve(int64(len(b))); err != nil || len(b) == 0 {
		return err
	}
	if err := h.m.v.Upload(h.buf, b, executor.Whole(int64(len(b)))); err != nil {
		return err
	}
	if err := h.m.Send(h.buf, int64(len(b)), to); err != nil {
		return err
	}
	return h.m.Wait(time.Now().Add(h.timeout))
}

func (h *hostOverNCCL) Recv(from int, b []byte) error {
	if err := h.reserve(int64(len(b))); err != nil || len(b) == 0 {
		return err
	}
	if err := h.m.Recv(h.buf, int64(len(b)), from); err != nil {
		return err
	}
	if err := h.m.Wait(time.Now().Add(h.timeout)); err != nil {
		return err
	}
	return h.m.v.Download(b, h.buf, executor.Whole(int64(len(b))))
}

// reserve makes the device buffer hold at least n bytes.
func (h *hostOverNCCL) reserve(n int64) error {
	if n <= h.size {
		return nil
	}
	if h.buf != 0 {
		if err := h.m.v.Free(h.buf); err != nil {
			return err
		}
		h.buf, h.size = 0, 0
	}
	p, err := h.m.v.Alloc(n)
	if err != nil {
		return fmt.Errorf("%s: a buffer of %d bytes for a host message: %w", h.m.where(), n, err)
	}
	h.buf, h.size = p, n
	return nil
}
