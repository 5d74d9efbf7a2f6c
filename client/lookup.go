package client

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// Key returns the coordinator key of a share partition, "groupId:topicId:partition", as
// FindCoordinator expects it (Kafka's SharePartitionKey).
func Key(groupID, topicID string, partition int32) string {
	return groupID + ":" + topicID + ":" + strconv.FormatInt(int64(partition), 10)
}

// Owner is the node leading the state partition of a coordinator key.
type Owner struct {
	// Key is the coordinator key.
	Key string
	// StatePartition is the state partition the key maps to.
	StatePartition int32
	// NodeID is the id of the node leading that state partition.
	NodeID int32
	// Address is that node's gRPC address, "host:port".
	Address string
}

// LookupError is a FindCoordinator answer naming no leader for a key: the key does not parse
// (INVALID_REQUEST), or its state partition has no leader right now (COORDINATOR_NOT_AVAILABLE).
type LookupError struct {
	// Key is the coordinator key.
	Key string
	// Code is the key's error code.
	Code pb.ErrorCode
	// Message is the server's message.
	Message string
}

// Error returns the key, the code and the server's message.
func (e *LookupError) Error() string {
	return fmt.Sprintf("coordinatord client: no owner for key %q: %s: %s", e.Key, e.Code, e.Message)
}

// unreachableError is a lookup that no node answered: every one failed with a transport error.
type unreachableError struct{ last error }

func (e *unreachableError) Error() string {
	return fmt.Sprintf("no coordinatord node answered: %v", e.last)
}

// GRPCStatus makes the error a gRPC UNAVAILABLE status for status.Code and status.Convert.
func (e *unreachableError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, "coordinatord client: "+e.Error())
}

// FindCoordinator asks one node which nodes lead the state partitions of keys (each
// "groupId:topicId:partition", see Key) and returns its answer as it is, one coordinator per key
// in request order. The nodes are tried in turn until one answers; the answers also refresh the
// client's routing cache.
func (c *Client) FindCoordinator(ctx context.Context, keys []string) (*pb.FindCoordinatorResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, _, err := c.find(ctx, keys, "")
	return resp, err
}

// Owner returns the node leading the state partition of a share partition, from the client's
// cache or else from a FindCoordinator. A key FindCoordinator names no leader for yields a
// *LookupError.
func (c *Client) Owner(ctx context.Context, groupID, topicID string, partition int32) (Owner, error) {
	key := Key(groupID, topicID, partition)
	if p, ok := c.routes.partition(key); ok {
		if n, ok := c.routes.leader(p); ok {
			return Owner{Key: key, StatePartition: p, NodeID: n.id, Address: n.addr}, nil
		}
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, _, err := c.find(ctx, []string{key}, "")
	if err != nil {
		return Owner{}, err
	}
	for _, co := range resp.GetCoordinators() {
		if co.GetKey() != key {
			continue
		}
		if n, ok := leaderOf(co); ok {
			return Owner{Key: key, StatePartition: co.GetStatePartition(), NodeID: n.id, Address: n.addr}, nil
		}
		return Owner{}, lookupError(co)
	}
	return Owner{}, &LookupError{Key: key, Code: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, Message: "FindCoordinator did not answer the key"}
}

// find sends one FindCoordinator for keys to the nodes of lookupOrder(prefer) in turn until one
// answers, learns the answers and returns them with the address that gave them. When no node
// answers it returns an *unreachableError holding the last transport error; when the call's
// context ends, or a node refuses the call (PERMISSION_DENIED, say), that error.
func (c *Client) find(ctx context.Context, keys []string, prefer string) (*pb.FindCoordinatorResponse, string, error) {
	var last error
	for _, addr := range c.routes.lookupOrder(prefer, c.opts.Bootstrap) {
		stub, err := c.stub(addr)
		if err != nil {
			return nil, "", err
		}
		c.stats.lookups.Add(1)
		actx, cancel := c.attemptContext(ctx)
		resp, err := stub.FindCoordinator(actx, &pb.FindCoordinatorRequest{Keys: keys})
		cancel()
		if err == nil {
			named := true
			for _, co := range resp.GetCoordinators() {
				c.learn(co)
				if _, ok := leaderOf(co); !ok && (co.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NONE || retriable(co.GetErrorCode())) {
					named = false
				}
			}
			c.routes.answered(addr, named)
			return resp, addr, nil
		}
		if ended(ctx) {
			return nil, "", endedError(ctx)
		}
		if !transient(ctx, err) {
			return nil, "", err
		}
		c.logger.Debug("FindCoordinator failed; asking the next node", zap.String("address", addr), zap.Error(err))
		last = fmt.Errorf("%s: %w", addr, err)
	}
	return nil, "", &unreachableError{last: last}
}

// learn caches one FindCoordinator answer.
func (c *Client) learn(co *pb.Coordinator) {
	if co.GetStatePartition() < 0 {
		return // the key does not parse: there is nothing to remember
	}
	n, _ := leaderOf(co)
	c.routes.learn(co.GetKey(), co.GetStatePartition(), n)
}

// leaderOf returns the leader a FindCoordinator answer names, if it names one.
func leaderOf(co *pb.Coordinator) (node, bool) {
	if co.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE || co.GetHost() == "" || co.GetPort() <= 0 {
		return node{}, false
	}
	return node{id: co.GetNodeId(), addr: net.JoinHostPort(co.GetHost(), strconv.Itoa(int(co.GetPort())))}, true
}

// lookupError is the error of a FindCoordinator answer that names no leader. An answer without
// an error code but without an address counts as COORDINATOR_NOT_AVAILABLE.
func lookupError(co *pb.Coordinator) *LookupError {
	if co.GetErrorCode() == pb.ErrorCode_ERROR_CODE_NONE {
		return &LookupError{Key: co.GetKey(), Code: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
			Message: fmt.Sprintf("FindCoordinator named node %d without an address (host %q, port %d)", co.GetNodeId(), co.GetHost(), co.GetPort())}
	}
	return &LookupError{Key: co.GetKey(), Code: co.GetErrorCode(), Message: co.GetErrorMessage()}
}

// transient reports whether err, from a request to one node, is worth retrying, elsewhere or
// later: the node could not be reached (UNAVAILABLE) or did not answer in time
// (DEADLINE_EXCEEDED) while the call itself still has time.
func transient(ctx context.Context, err error) bool {
	if ended(ctx) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// ended reports whether the call of ctx is over: cancelled, or past its deadline. gRPC fails a
// request with DEADLINE_EXCEEDED by its own timer, possibly before ctx.Err is set, so the
// deadline is compared too.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// endedError is the status error of a call that ended.
func endedError(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return status.FromContextError(context.DeadlineExceeded).Err()
}

// callContext gives ctx the client's default deadline when it has none.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.CallTimeout)
}

// attemptContext bounds one request to one node by Options.AttemptTimeout, if set.
func (c *Client) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.opts.AttemptTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.AttemptTimeout)
}
