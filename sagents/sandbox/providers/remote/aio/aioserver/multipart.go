package aioserver

import (
	"bytes"
	"mime/multipart"
)

func multipartReader(body []byte, boundary string) *multipart.Reader {
	return multipart.NewReader(bytes.NewReader(body), boundary)
}
