// Package kafkauser is the KafkaUser reconciler: for every KafkaUser it makes what the user's
// application authenticates with and what the brokers check it against (docs/security.md,
// "KafkaUser"):
//
//   - scram-sha-512: a generated password (or the one a referenced Secret holds) in the
//     user's own Secret `<user>` (`password`, `sasl.jaas.config`), and the salted SCRAM-SHA-256
//     and SCRAM-SHA-512 credentials — never the password — under the user's name in the
//     cluster's `<cluster>-scram-credentials`, re-salted only when the password changes;
//   - tls: a client certificate `CN=<user>` from the cluster's clients CA in `<user>`
//     (`ca.crt`, `user.crt`, `user.key`), renewed before expiry and when the CA changes;
//   - no authentication: nothing to issue (a principal that only has ACLs).
//
// A finalizer holds the KafkaUser until its credentials entry is gone: deleting a user is
// what revokes it, and the brokers close its connections at their next request. It writes
// the user's Secret, its own entry of the credentials Secret, the KafkaUser's status and
// finalizer, and Events that never carry a password or a key.
package kafkauser
