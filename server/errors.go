package server

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"qshare"
	"qshare/api"
	"qshare/aws/awsjson"
	"qshare/aws/awsquery"
	"qshare/aws/wire"
)

// The error shapes of the one endpoint. Each route writes its errors in
// its own protocol's shape (Route.WriteError), which its SDK reads; a
// request that no route takes (signed for a service qshare does not
// serve) gets the shape of the protocol it was sent in, read from the
// request itself, never a 500 or an HTML page.

// errorWriterOf returns the writer of r's refusals: its route's, else
// (no route, or one without its own) the shape its protocol implies.
func errorWriterOf(c *Classified, r *http.Request) func(http.ResponseWriter, error) {
	if c.Route != nil {
		if c.Route.WriteError != nil {
			return c.Route.WriteError
		}
		return api.WriteError
	}
	return protocolErrorWriter(r)
}

// protocolErrorWriter guesses the protocol of a request for a service
// qshare does not know from what it carries: awsJson (X-Amz-Target, or an
// application/x-amz-json body), awsQuery (a form body: STS, IAM, SQS, EC2),
// restJson (a JSON body, as Batch's), else REST-XML (S3's kind: no body,
// or any other).
func protocolErrorWriter(r *http.Request) func(http.ResponseWriter, error) {
	ct := r.Header.Get("Content-Type")
	switch {
	case r.Header.Get("X-Amz-Target") != "" || strings.HasPrefix(ct, "application/x-amz-json"):
		return unknownJSON.WriteError
	case strings.HasPrefix(ct, awsquery.ContentType):
		return unknownQuery.WriteError
	case strings.HasPrefix(ct, "application/json"):
		return api.WriteError
	}
	return restXMLError
}

// unknownJSON and unknownQuery write errors of services qshare does not
// know, in awsJson's and awsQuery's shapes, with the codes those
// protocols' services share.
var (
	unknownJSON  = &awsjson.Service{Name: "this endpoint", Errors: awsjson.WithCommonErrors(wire.Errors{qshare.EINVALID: {Code: "UnknownOperationException", Status: http.StatusBadRequest}})}
	unknownQuery = &awsquery.Service{Name: "this endpoint", Errors: awsquery.WithCommonErrors(wire.Errors{qshare.EINVALID: {Code: "InvalidAction", Status: http.StatusBadRequest}})}
)

// restXMLErrors are the REST-XML error codes (S3's) of qshare's errors.
var restXMLErrors = wire.Common(wire.RestXML, wire.Errors{
	qshare.EINVALID:  {Code: "InvalidRequest", Status: http.StatusBadRequest},
	qshare.ENOTFOUND: {Code: "NoSuchKey", Status: http.StatusNotFound},
})

// restXMLError writes err as a REST-XML service (S3) does:
// <Error><Code/><Message/><RequestId/></Error>. A code without an entry is
// InternalError, its text hidden.
func restXMLError(w http.ResponseWriter, err error) {
	rid := wire.RequestID(w)
	e := restXMLErrors.Resolve(err)
	b, _ := xml.Marshal(struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string   `xml:"Code"`
		Message   string   `xml:"Message"`
		RequestID string   `xml:"RequestId"`
	}{Code: e.Code, Message: e.Message, RequestID: rid})
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

// noRoute answers a request that no route takes, one signed for a service
// this server does not serve, in its protocol's shape.
func noRoute(w http.ResponseWriter, r *http.Request, c *Classified) {
	protocolErrorWriter(r)(w, qshare.Errorf(qshare.EINVALID, "this server does not serve the service %s (the request's credential scope): it serves %s", strconv.Quote(clip(c.Service)), servedNames))
}

// servedNames names the signing names of the services qshare serves, for
// noRoute's message.
const servedNames = "batch, s3, sts, iam, sagemaker and logs"
