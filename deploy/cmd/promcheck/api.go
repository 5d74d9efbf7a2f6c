package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// promAPI is the part of the Prometheus HTTP API (v1) that promcheck uses.
type promAPI struct {
	base   *url.URL
	client *http.Client
}

// apiResponse is the envelope of every /api/v1 answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// query runs expr as an instant query and returns how many samples or series it returned.
func (a promAPI) query(ctx context.Context, expr string) (int, error) {
	data, err := a.get(ctx, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return 0, err
	}
	var result struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &result); err != nil {
		return 0, fmt.Errorf("decode query result: %w", err)
	}
	switch result.ResultType {
	case "vector", "matrix":
		var items []json.RawMessage
		if err := json.Unmarshal(result.Result, &items); err != nil {
			return 0, fmt.Errorf("decode %s: %w", result.ResultType, err)
		}
		return len(items), nil
	case "scalar", "string":
		return 1, nil
	default:
		return 0, fmt.Errorf("unexpected result type %q", result.ResultType)
	}
}

// series returns how many series match selector between start and end.
func (a promAPI) series(ctx context.Context, selector string, start, end time.Time) (int, error) {
	data, err := a.get(ctx, "/api/v1/series", url.Values{
		"match[]": {selector},
		"start":   {strconv.FormatInt(start.Unix(), 10)},
		"end":     {strconv.FormatInt(end.Unix(), 10)},
	})
	if err != nil {
		return 0, err
	}
	var sets []map[string]string
	if err := json.Unmarshal(data, &sets); err != nil {
		return 0, fmt.Errorf("decode series: %w", err)
	}
	return len(sets), nil
}

func (a promAPI) get(ctx context.Context, path string, params url.Values) (json.RawMessage, error) {
	u := a.base.JoinPath(path)
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s response: %w", path, err)
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET %s: HTTP %d, undecodable body: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("GET %s: HTTP %d, %s: %s", path, resp.StatusCode, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// names returns the metric names of the series that match selector between start and end.
func (a promAPI) names(ctx context.Context, selector string, start, end time.Time) ([]string, error) {
	data, err := a.get(ctx, "/api/v1/label/__name__/values", url.Values{
		"match[]": {selector},
		"start":   {strconv.FormatInt(start.Unix(), 10)},
		"end":     {strconv.FormatInt(end.Unix(), 10)},
	})
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return nil, fmt.Errorf("decode metric names: %w", err)
	}
	return names, nil
}

// ruleState is one rule as Prometheus' /api/v1/rules reports it.
type ruleState struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Health    string `json:"health"` // ok, err or unknown (not evaluated yet)
	LastError string `json:"lastError"`
}

// rules returns every rule that Prometheus has loaded.
func (a promAPI) rules(ctx context.Context) ([]ruleState, error) {
	data, err := a.get(ctx, "/api/v1/rules", nil)
	if err != nil {
		return nil, err
	}
	var result struct {
		Groups []struct {
			Rules []ruleState `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &result); err != nil {
		return nil, fmt.Errorf("decode rules: %w", err)
	}
	var out []ruleState
	for _, g := range result.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}
