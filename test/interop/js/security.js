// The kafkajs ssl and sasl options INTEROP_SECURITY asks for (JSON):
// {"ca": file, "cert": file, "key": file, "sasl": {"mechanism": "scram-sha-512" |
// "scram-sha-256" | "plain", "username", "password"}} — TLS trusting the CA bundle in "ca"
// (host names checked), presenting the client certificate "cert"/"key" when given, and SASL
// when "sasl" is given. {} without INTEROP_SECURITY.
'use strict';

const fs = require('fs');

function security() {
  if (!process.env.INTEROP_SECURITY) {
    return {};
  }
  const s = JSON.parse(process.env.INTEROP_SECURITY);
  const ssl = { ca: [fs.readFileSync(s.ca)], rejectUnauthorized: true };
  if (s.cert) {
    ssl.cert = fs.readFileSync(s.cert);
    ssl.key = fs.readFileSync(s.key);
  }
  return s.sasl ? { ssl, sasl: s.sasl } : { ssl };
}

module.exports = { security };
