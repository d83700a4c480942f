package aioserver_test

import "encoding/json"

func aioDecode(b []byte, v any) error { return json.Unmarshal(b, v) }
