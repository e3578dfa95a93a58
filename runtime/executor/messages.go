package executor

import "fmt"

// allocateMessages allocates the device buffer a message is gathered
// into before it is sent and received into before it is scattered: as
// large as the plan's largest buffer, which bounds a copy's box.
func (pr *Program) allocateMessages() error {
	var most int64
	for _, b := range pr.Plan.Buffers {
		most = max(most, b.Bytes)
	}
	dev := pr.devs[pr.ranks.Rank()]
	var err error
	if pr.messages, err = dev.Alloc(most); err != nil {
		return fmt.Errorf("%s: the buffer of messages, %d bytes: %w", dev.Name(), most, err)
	}
	pr.releases = append(pr.releases, func() { dev.Free(pr.messages) })
	return nil
}

// sendCopies enqueues on this rank's device the messages of a step of
// another device that copies from this one (a copy step, or a part of
// a reduction): each after the device's earlier work, as rows gathered
// into one message.
func (pr *Program) sendCopies(o op, to int) error {
	me := pr.ranks.Rank()
	for _, c := range o.copies {
		if c.from != me {
			continue
		}
		if err := pr.send(c, to); err != nil {
			return err
		}
	}
	return nil
}

// send enqueues copy c's rows as one message to rank to.
func (pr *Program) send(c transfer, to int) error {
	dev := pr.devs[pr.ranks.Rank()]
	if pr.msgs == nil {
		host := dev.(HostDevice)
		return host.Do(pr.message(func() error {
			msg, err := gatherRows(host, c.src, c.rows)
			if err != nil {
				return err
			}
			return pr.ranks.Send(to, msg)
		}))
	}
	var off int64
	for _, r := range c.rows {
		if err := dev.Copy(pr.messages, dev, c.src, packedTo(r, off)); err != nil {
			return err
		}
		off += r.Bytes()
	}
	return pr.msgs.Send(pr.messages, off, to)
}

// receive enqueues on this rank's device the message of copy c from
// another rank's device, scattered to its rows.
func (pr *Program) receive(c transfer) error {
	dev := pr.devs[pr.ranks.Rank()]
	n := rowsBytes(c.rows)
	if pr.msgs == nil {
		host := dev.(HostDevice)
		return host.Do(pr.message(func() error {
			msg := make([]byte, n)
			if err := pr.ranks.Recv(c.from, msg); err != nil {
				return err
			}
			return scatterRows(host, msg, c.dst, c.rows)
		}))
	}
	if err := pr.msgs.Recv(pr.messages, n, c.from); err != nil {
		return err
	}
	var off int64
	for _, r := range c.rows {
		if err := dev.Copy(c.dst, dev, pr.messages, packedFrom(r, off)); err != nil {
			return err
		}
		off += r.Bytes()
	}
	return nil
}

// packedTo is r with its destination rows packed one after the other
// from offset off; packedFrom likewise its source rows.
func packedTo(r Rows, off int64) Rows {
	r.DstOff, r.DstPitch, r.DstSlice = off, r.Width, r.Width*r.Height
	return r
}

func packedFrom(r Rows, off int64) Rows {
	r.SrcOff, r.SrcPitch, r.SrcSlice = off, r.Width, r.Width*r.Height
	return r
}

// rowsBytes is how much a list of strided copies moves.
func rowsBytes(rows []Rows) int64 {
	var n int64
	for _, r := range rows {
		n += r.Bytes()
	}
	return n
}

// gatherRows reads the source rows of rows (at src) into one buffer, in
// order.
func gatherRows(dev HostDevice, src Ptr, rows []Rows) ([]byte, error) {
	var out []byte
	for _, r := range rows {
		var err error
		r.Each(func(so, _ int64) {
			if err != nil {
				return
			}
			var b []byte
			if b, err = dev.Bytes(src+Ptr(so), r.Width); err == nil {
				out = append(out, b...)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scatterRows writes msg, the rows of rows in order, to their
// destinations (at dst).
func scatterRows(dev HostDevice, msg []byte, dst Ptr, rows []Rows) error {
	var err error
	for _, r := range rows {
		r.Each(func(_, do int64) {
			if err != nil {
				return
			}
			var b []byte
			if b, err = dev.Bytes(dst+Ptr(do), r.Width); err == nil {
				msg = msg[copy(b, msg):]
			}
		})
	}
	return err
}

// sendTile sends the rows of an output's tile, which this rank's device
// holds at src, to rank 0 (the device is idle: after the run).
func (pr *Program) sendTile(src Ptr, rows []Rows) error {
	msg := make([]byte, rowsBytes(rows))
	var off int64
	for _, r := range rows {
		if err := pr.devs[pr.ranks.Rank()].Download(msg, src, packedTo(r, off)); err != nil {
			return err
		}
		off += r.Bytes()
	}
	return pr.ranks.Send(0, msg)
}

// receiveTile receives the rows of an output's tile from the rank of
// device d into the output's memory host.
func (pr *Program) receiveTile(host []byte, d int, rows []Rows) error {
	msg := make([]byte, rowsBytes(rows))
	if err := pr.ranks.Recv(d, msg); err != nil {
		return err
	}
	for _, r := range rows {
		r.Each(func(_, do int64) {
			msg = msg[copy(host[do:do+r.Width], msg):]
		})
	}
	return nil
}

// message wraps a host rank's message (or collective call) so that
// after one fails the others are skipped and the run stops enqueuing
// (enqueue): each would otherwise wait out the timeout in turn for a
// rank that is gone.
func (pr *Program) message(f func() error) func() error {
	return func() error {
		if pr.msgFailed != nil {
			return nil // reported once
		}
		err := f()
		if err != nil {
			pr.msgFailed = err
		}
		return err
	}
}
