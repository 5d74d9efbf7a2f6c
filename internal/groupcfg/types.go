package groupcfg

import "strconv"

// Type is the type of a config value. The numbers are Kafka's DescribeConfigs ConfigType ids.
type Type int8

// Config value types.
const (
	TypeBoolean  Type = 1 // "true" or "false", case-insensitive
	TypeString   Type = 2 // any text, surrounding whitespace trimmed
	TypeInt      Type = 3 // a whole number in [-2^31, 2^31-1]
	TypeLong     Type = 5 // a whole number in [-2^63, 2^63-1]
	TypeList     Type = 7 // comma-separated text items, each trimmed
	TypePassword Type = 9 // text that is never shown (always Sensitive)
)

// String returns Kafka's name of the type (BOOLEAN, STRING, INT, LONG, LIST, PASSWORD).
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "BOOLEAN"
	case TypeString:
		return "STRING"
	case TypeInt:
		return "INT"
	case TypeLong:
		return "LONG"
	case TypeList:
		return "LIST"
	case TypePassword:
		return "PASSWORD"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Importance says how much an operator should care about a key (Kafka's ConfigDef.Importance).
type Importance int8

// Importance levels.
const (
	ImportanceHigh   Importance = 1
	ImportanceMedium Importance = 2
	ImportanceLow    Importance = 3
)

// String returns "high", "medium" or "low".
func (i Importance) String() string {
	switch i {
	case ImportanceHigh:
		return "high"
	case ImportanceMedium:
		return "medium"
	case ImportanceLow:
		return "low"
	}
	return "Importance(" + strconv.Itoa(int(i)) + ")"
}

// Scope says where a key is set.
type Scope int8

// Scopes.
const (
	// ScopeBroker keys are set for the whole process, from the properties file, the environment or
	// --override (and, when Dynamic, on the BROKER resource at run time).
	ScopeBroker Scope = 1
	// ScopeGroup keys are set per share group on a GROUP resource; unset ones inherit a default.
	ScopeGroup Scope = 2
)

// String returns "broker" or "group".
func (s Scope) String() string {
	switch s {
	case ScopeBroker:
		return "broker"
	case ScopeGroup:
		return "group"
	}
	return "Scope(" + strconv.Itoa(int(s)) + ")"
}

// ConfigSource says where a value in force comes from. The numbers are Kafka's DescribeConfigs
// ConfigSource ids.
type ConfigSource int8

// Config sources, most precedent first.
const (
	SourceGroupConfig         ConfigSource = 8 // a per-group override (GROUP resource)
	SourceDynamicBrokerConfig ConfigSource = 2 // altered at run time on the BROKER resource
	SourceStaticBrokerConfig  ConfigSource = 4 // properties file, environment or --override
	SourceDefaultConfig       ConfigSource = 5 // the built-in default (of the key, or of an unset group key's broker synonym)
)

// String returns Kafka's name of the source, e.g. "DYNAMIC_BROKER_CONFIG".
func (s ConfigSource) String() string {
	switch s {
	case SourceGroupConfig:
		return "GROUP_CONFIG"
	case SourceDynamicBrokerConfig:
		return "DYNAMIC_BROKER_CONFIG"
	case SourceStaticBrokerConfig:
		return "STATIC_BROKER_CONFIG"
	case SourceDefaultConfig:
		return "DEFAULT_CONFIG"
	}
	return "ConfigSource(" + strconv.Itoa(int(s)) + ")"
}

// ResourceType is the kind of resource an admin request addresses (Kafka's ConfigResource.Type ids).
// It is as wide as the API's enum, so that a value the API does not define stays undefined here
// instead of wrapping onto a defined one.
type ResourceType int32

// Resource types.
const (
	ResourceTopic  ResourceType = 2 // not supported by coordinatord: always INVALID_REQUEST
	ResourceBroker ResourceType = 4 // this node; name "" or the node id
	ResourceGroup  ResourceType = 32
)

// String returns "TOPIC", "BROKER" or "GROUP".
func (r ResourceType) String() string {
	switch r {
	case ResourceTopic:
		return "TOPIC"
	case ResourceBroker:
		return "BROKER"
	case ResourceGroup:
		return "GROUP"
	}
	return "ResourceType(" + strconv.Itoa(int(r)) + ")"
}

// Operation is an IncrementalAlterConfigs operation (Kafka's AlterConfigOp.OpType ids plus one, as
// in the sharecoord.v1 ConfigOperation enum whose zero value is UNSPECIFIED). As wide as the API's
// enum, for the reason given at ResourceType.
type Operation int32

// Operations.
const (
	OpSet      Operation = 1 // set the value
	OpDelete   Operation = 2 // remove the override (revert to the inherited or static value)
	OpAppend   Operation = 3 // add items to a LIST value; INVALID_CONFIG for other types
	OpSubtract Operation = 4 // remove items from a LIST value; INVALID_CONFIG for other types
)

// String returns "SET", "DELETE", "APPEND" or "SUBTRACT".
func (o Operation) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpDelete:
		return "DELETE"
	case OpAppend:
		return "APPEND"
	case OpSubtract:
		return "SUBTRACT"
	}
	return "Operation(" + strconv.Itoa(int(o)) + ")"
}
