package enginehelper

import (
	"bufio"
	"encoding/gob"
	"encoding/json"
	"math/rand/v2"
	"net"
)

// wireCodec carries one request to an FE's holder (or engine VM) and brings back its reply.
type wireCodec interface {
	roundTrip(req wireReq) (wireReply, error)
}

// gobCodec is the TCP link to a holder on another machine: a gob stream each way.
type gobCodec struct {
	enc *gob.Encoder
	dec *gob.Decoder
}

func (c gobCodec) roundTrip(req wireReq) (wireReply, error) {
	var rep wireReply
	err := c.enc.Encode(req)
	if err == nil {
		err = c.dec.Decode(&rep)
	}
	return rep, err
}

// jsonCodec is the link to a VM's mirror port: one JSON object a line each way, as the guest
// agent's own port. The port outlives its host connections, so a reply an earlier helper left
// unread may come first: replies carry their request's ID, and others are skipped.
type jsonCodec struct {
	conn net.Conn
	rd   *bufio.Reader
	next uint64
}

func newJSONCodec(conn net.Conn) *jsonCodec {
	return &jsonCodec{conn: conn, rd: bufio.NewReaderSize(conn, 1<<16), next: rand.Uint64() >> 1}
}

func (c *jsonCodec) roundTrip(req wireReq) (wireReply, error) {
	c.next++
	req.ID = c.next
	data, err := json.Marshal(req)
	if err != nil {
		return wireReply{}, err
	}
	if _, err := c.conn.Write(append(data, '\n')); err != nil {
		return wireReply{}, err
	}
	for {
		line, err := c.rd.ReadBytes('\n')
		if err != nil {
			return wireReply{}, err
		}
		var rep wireReply
		if json.Unmarshal(line, &rep) == nil && rep.ID == req.ID { // else the rest of an earlier one
			return rep, nil
		}
	}
}
