// kafkajs's view of paddock's internal topic, for test/interop (internal_test.go runs it):
//
//   node internal.js <broker,broker,...>
//
// It lists the topics with the admin client, reads __consumer_offsets' partitions and
// leaders and its cleanup.policy, and reads the is_internal flag from the Metadata answer as
// kafkajs decodes it (the admin API does not return the flag, so the script asks the
// client's own cluster object, made the way kafkajs makes one for its admin client). It
// prints {listed, partitions, leaders, internal, cleanupPolicy} and exits 0; any error is
// printed to stderr and exits 1.
'use strict';

const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');
const InstrumentationEventEmitter = require('kafkajs/src/instrumentation/emitter');

const TOPIC = '__consumer_offsets';

async function main() {
  const [brokers] = process.argv.slice(2);
  if (!brokers) {
    throw new Error('usage: node internal.js <brokers>');
  }
  const kafka = new Kafka({
    clientId: 'interop-kafkajs-internal',
    brokers: brokers.split(','),
    logLevel: logLevel.WARN,
    retry: { initialRetryTime: 100, retries: 10 },
  });
  const admin = kafka.admin();
  await admin.connect();
  const listed = (await admin.listTopics()).includes(TOPIC);
  const { topics } = await admin.fetchTopicMetadata({ topics: [TOPIC] });
  const partitions = topics[0].partitions.sort((a, b) => a.partitionId - b.partitionId);
  const configs = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: TOPIC, configNames: ['cleanup.policy'] }],
    includeSynonyms: false,
  });
  const cleanup = configs.resources[0].configEntries.find((e) => e.configName === 'cleanup.policy');
  await admin.disconnect();

  const createCluster = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster');
  const cluster = kafka[createCluster]({ instrumentationEmitter: new InstrumentationEventEmitter() });
  await cluster.connect();
  const metadata = await cluster.metadata();
  await cluster.disconnect();
  const offsets = metadata.topicMetadata.find((t) => t.topic === TOPIC);

  process.stdout.write(JSON.stringify({
    listed,
    partitions: partitions.length,
    leaders: partitions.map((p) => p.leader),
    internal: Boolean(offsets && offsets.isInternal),
    cleanupPolicy: cleanup ? cleanup.configValue : '',
  }));
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
