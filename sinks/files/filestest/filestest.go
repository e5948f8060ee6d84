// Package filestest starts object stores for tests: an in-process S3
// server (gofakes3) on the loopback interface, which swerl reaches
// through the same Beam filesystem and AWS SDK as a real bucket.
package filestest

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"swerl/sinks/files"
)

// S3 serves an empty bucket over the S3 API on 127.0.0.1 until the test
// ends, points the AWS SDK of this process at it (AWS_ENDPOINT_URL,
// region, static keys) and returns the bucket's URL, "s3://bucket". The
// environment is the process's: tests that call it must not run in
// parallel with others that use s3://.
func S3(t testing.TB, bucket string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := s3mem.New()
	srv := &http.Server{Handler: gofakes3.New(backend).Server()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	endpoint := "http://" + ln.Addr().String()
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	files.ResetClients()
	t.Cleanup(files.ResetClients)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return "s3://" + bucket
}
