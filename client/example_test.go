package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordinatord/coordinatord/client"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// A share-partition leader writes the delivery state of two partitions: the client sends each
// to the node leading its key's state partition, retries what fails retriably for up to five
// seconds, and answers once for both.
func Example() {
	c, err := client.New(client.Options{
		// Any nodes of the cluster; the client learns the others from FindCoordinator.
		Bootstrap: []string{"coordinatord-0.coordinatord:7070", "coordinatord-1.coordinatord:7070"},
		// Plaintext here; use credentials.NewTLS for a server with TLS.
		DialOptions:  []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		RetryBackoff: client.Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.WriteShareGroupState(ctx, &pb.WriteShareGroupStateRequest{
		GroupId: "g1",
		Topics: []*pb.WriteStateTopic{{
			TopicId: "P6hfZFcXRWKz_CyWP2avpg",
			Partitions: []*pb.WriteStatePartition{
				{Partition: 0, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 10,
					StateBatches: []*pb.StateBatch{{FirstOffset: 10, LastOffset: 19, DeliveryState: 2, DeliveryCount: 1}}},
				{Partition: 1, StateEpoch: 1, LeaderEpoch: 1, StartOffset: -1},
			},
		}},
	})
	if err != nil {
		// The call failed as a whole: no node reachable, permission denied, ...
		fmt.Println("write failed:", err)
		return
	}
	// Per-partition outcomes, in request order. A retriable code here means the deadline came
	// first; a write is safe to send again.
	for _, t := range resp.GetResults() {
		for _, p := range t.GetPartitions() {
			fmt.Printf("%s-%d: %s %s\n", t.GetTopicId(), p.GetPartition(), p.GetErrorCode(), p.GetErrorMessage())
		}
	}
	s := c.Stats()
	fmt.Printf("%d retries, %d partitions redirected\n", s.Retries, s.Redirects)
}
