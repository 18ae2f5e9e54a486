package idem_test

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/readretry/readretry/idem"
)

func TestResponseRoundTrip(t *testing.T) {
	cases := []idem.Response{
		{Status: 201, Fingerprint: []byte("POST /orders"), Header: http.Header{
			"Location": {"/orders/1"}, "Set-Cookie": {"a=1", "b=2"}, "X-Empty": {""},
		}, Body: []byte("created\x00binary")},
		{Status: 200, Header: http.Header{}},
		{Status: 404, Header: http.Header{"Content-Type": {"text/plain"}}, BodyOmitted: true},
	}
	for _, want := range cases {
		b := idem.AppendResponse([]byte("prefix"), &want)
		got, err := idem.DecodeResponse(b[len("prefix"):])
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got.Status != want.Status || !bytes.Equal(got.Fingerprint, want.Fingerprint) ||
			!bytes.Equal(got.Body, want.Body) || got.BodyOmitted != want.BodyOmitted ||
			!reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

func TestDecodeResponseMalformed(t *testing.T) {
	good := idem.AppendResponse(nil, &idem.Response{Status: 200, Fingerprint: []byte("fp"),
		Header: http.Header{"A": {"b"}}, Body: []byte("body")})
	bad := [][]byte{
		nil,
		{1, 0, 0},
		{2, 0, 0, 200, 0, 0},         // version
		{1, 4, 0, 200, 0, 0},         // unknown flag
		{1, 0, 0, 99, 0, 0},          // status < 100
		{1, 0, 0x03, 0xe8, 0, 0},     // status 1000
		{1, 0, 0, 200, 5, 'a'},       // fingerprint past the end
		{1, 0, 0, 200, 0, 3, 1, 'a'}, // header lines past the end
		{1, 0, 0, 200, 0, 1, 0, 0},   // empty header name
		{1, 1, 0, 200, 0, 0, 'x'},    // body after "omitted"
		{1, 0, 0, 200, 0, 0x80},      // truncated uvarint
	}
	for i := 1; i < len(good)-len("body"); i++ {
		bad = append(bad, good[:i])
	}
	for _, b := range bad {
		if _, err := idem.DecodeResponse(b); !errors.Is(err, idem.ErrRecord) {
			t.Errorf("DecodeResponse(%x) = %v, want ErrRecord", b, err)
		}
	}
}

// FuzzDecodeResponse: any bytes decode to an error or to a response that
// encodes back to bytes decoding to the same response; never a panic.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(idem.AppendResponse(nil, &idem.Response{Status: 201, Fingerprint: []byte("POST /x"),
		Header: http.Header{"Location": {"/x/1"}, "Set-Cookie": {"a", "b"}}, Body: []byte("ok")}))
	f.Add(idem.AppendResponse(nil, &idem.Response{Status: 204, BodyOmitted: true}))
	f.Add([]byte{1, 0, 0, 200, 0, 0})
	f.Add([]byte{1, 0, 0, 200, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := idem.DecodeResponse(b)
		if err != nil {
			if !errors.Is(err, idem.ErrRecord) {
				t.Fatalf("error %v is not ErrRecord", err)
			}
			return
		}
		again, err := idem.DecodeResponse(idem.AppendResponse(nil, r))
		if err != nil {
			t.Fatalf("re-encoded response does not decode: %v", err)
		}
		if again.Status != r.Status || !bytes.Equal(again.Body, r.Body) || again.BodyOmitted != r.BodyOmitted ||
			!bytes.Equal(again.Fingerprint, r.Fingerprint) || !reflect.DeepEqual(again.Header, r.Header) {
			t.Fatalf("round trip changed the response:\n%+v\n%+v", r, again)
		}
	})
}
