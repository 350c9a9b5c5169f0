// Package acl decides whether a principal may perform an operation on a resource, with Apache
// Kafka's ACL semantics (the simple authorizer; docs/security.md, "Authorization"): super
// users may do everything; any matching DENY denies; else a matching ALLOW allows, READ,
// WRITE, DELETE and ALTER implying DESCRIBE and ALTER_CONFIGS implying DESCRIBE_CONFIGS; else
// deny (allow.everyone.if.no.acl.found is false).
//
// It is pure: plain inputs (the KafkaUsers' rules as the broker reads them), no client, no
// clock, no I/O. It must never decide from anything but its arguments.
package acl
