CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL,
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
)
;
CREATE TABLE threads (
	id VARCHAR NOT NULL,
	package VARCHAR NOT NULL,
	agent_id VARCHAR NOT NULL,
	user_id VARCHAR,
	parent_id VARCHAR,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	terminated BIGINT,
	stopped BOOLEAN NOT NULL,
	env JSON,
	env_types JSON,
	tags JSON,
	properties JSON,
	execution JSON,
	timeline JSON,
	PRIMARY KEY (id),
	FOREIGN KEY(parent_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_threads_created ON threads (created_at)
;
CREATE INDEX ix_threads_package_agent_created ON threads (package, agent_id, created_at)
;
CREATE INDEX ix_threads_parent_created ON threads (parent_id, created_at)
;
CREATE TABLE request_parts (
	"key" VARCHAR NOT NULL,
	parts JSON NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY ("key")
)
;
CREATE TABLE file_blobs (
	hash VARCHAR NOT NULL,
	data BLOB NOT NULL,
	size BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (hash)
)
;
CREATE TABLE api_keys (
	id VARCHAR NOT NULL,
	name VARCHAR NOT NULL,
	prefix VARCHAR NOT NULL,
	key_hash VARCHAR NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT,
	packages JSON,
	read_only BOOLEAN DEFAULT 0 NOT NULL,
	PRIMARY KEY (id),
	UNIQUE (key_hash)
)
;
CREATE INDEX ix_api_keys_prefix ON api_keys (prefix)
;
CREATE TABLE workers (
	id VARCHAR NOT NULL,
	started_at BIGINT NOT NULL,
	heartbeat_at BIGINT NOT NULL,
	PRIMARY KEY (id)
)
;
CREATE TABLE stream_frames (
	seq INTEGER NOT NULL,
	thread_id VARCHAR NOT NULL,
	frame JSON,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (seq)
)
;
CREATE INDEX ix_stream_frames_created ON stream_frames (created_at)
;
CREATE TABLE schedules (
	package VARCHAR NOT NULL,
	name VARCHAR NOT NULL,
	agent VARCHAR NOT NULL,
	message VARCHAR NOT NULL,
	cron VARCHAR,
	every VARCHAR,
	timezone VARCHAR NOT NULL,
	thread VARCHAR NOT NULL,
	description VARCHAR NOT NULL,
	status VARCHAR NOT NULL,
	source VARCHAR NOT NULL,
	next_run_at BIGINT,
	last_run_at BIGINT,
	last_thread_id VARCHAR,
	thread_id VARCHAR,
	runs INTEGER NOT NULL,
	last_error VARCHAR,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (package, name)
)
;
CREATE INDEX ix_schedules_status_next ON schedules (status, next_run_at)
;
CREATE TABLE store_items (
	seq INTEGER NOT NULL,
	package VARCHAR NOT NULL,
	namespace VARCHAR NOT NULL,
	"key" VARCHAR NOT NULL,
	value JSON,
	text VARCHAR NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	expires_at BIGINT,
	PRIMARY KEY (seq)
)
;
CREATE INDEX ix_store_items_expires ON store_items (expires_at)
;
CREATE UNIQUE INDEX ux_store_items_key ON store_items (package, namespace, "key")
;
CREATE VIRTUAL TABLE IF NOT EXISTS store_items_fts USING fts5(text)
;
CREATE TABLE eval_runs (
	id VARCHAR NOT NULL,
	suite VARCHAR NOT NULL,
	target VARCHAR NOT NULL,
	status VARCHAR NOT NULL,
	created_at BIGINT NOT NULL,
	finished_at BIGINT,
	summary JSON,
	document JSON,
	PRIMARY KEY (id)
)
;
CREATE INDEX ix_eval_runs_created ON eval_runs (created_at)
;
CREATE TABLE eval_trials (
	run_id VARCHAR NOT NULL,
	case_id VARCHAR NOT NULL,
	trial INTEGER NOT NULL,
	thread_id VARCHAR,
	passed BOOLEAN NOT NULL,
	score FLOAT NOT NULL,
	result JSON,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (run_id, case_id, trial)
)
;
CREATE TABLE eval_cache (
	"key" VARCHAR NOT NULL,
	trial_key VARCHAR NOT NULL,
	response JSON,
	created_at BIGINT NOT NULL,
	PRIMARY KEY ("key")
)
;
CREATE INDEX ix_eval_cache_trial ON eval_cache (trial_key)
;
CREATE TABLE thread_tags (
	thread_id VARCHAR NOT NULL,
	tag VARCHAR NOT NULL,
	PRIMARY KEY (thread_id, tag),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_thread_tags_tag ON thread_tags (tag, thread_id)
;
CREATE TABLE messages (
	seq INTEGER NOT NULL,
	id VARCHAR NOT NULL,
	thread_id VARCHAR NOT NULL,
	role VARCHAR NOT NULL,
	content VARCHAR,
	name VARCHAR,
	tool_calls JSON,
	tool_call_id VARCHAR,
	log_id VARCHAR,
	created_at BIGINT NOT NULL,
	request_sent_at BIGINT,
	response_completed_at BIGINT,
	status VARCHAR,
	silent BOOLEAN NOT NULL,
	tool_status VARCHAR,
	reasoning_content VARCHAR,
	reasoning_details JSON,
	parent_id VARCHAR,
	depth INTEGER NOT NULL,
	prompt VARCHAR,
	attachments JSON,
	meta JSON,
	subagent_id VARCHAR,
	subagent_name VARCHAR,
	subagent_title VARCHAR,
	subagent_description VARCHAR,
	subagent_status VARCHAR,
	subagent_resumable BOOLEAN,
	subagent_blocking BOOLEAN,
	subagent_thread_name VARCHAR,
	subagent_spawn_group_id VARCHAR,
	extra JSON,
	PRIMARY KEY (seq),
	UNIQUE (id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_messages_thread_created ON messages (thread_id, created_at)
;
CREATE INDEX ix_messages_thread_parent ON messages (thread_id, parent_id) WHERE parent_id IS NOT NULL
;
CREATE TABLE logs (
	seq INTEGER NOT NULL,
	id VARCHAR NOT NULL,
	thread_id VARCHAR NOT NULL,
	type VARCHAR NOT NULL,
	data JSON,
	created_at BIGINT NOT NULL,
	parent_id VARCHAR,
	extra JSON,
	recording JSON,
	PRIMARY KEY (seq),
	UNIQUE (id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_logs_thread_created ON logs (thread_id, created_at)
;
CREATE TABLE files (
	thread_id VARCHAR NOT NULL,
	path VARCHAR NOT NULL,
	parent VARCHAR NOT NULL,
	name VARCHAR NOT NULL,
	is_directory BOOLEAN NOT NULL,
	mime_type VARCHAR NOT NULL,
	storage VARCHAR NOT NULL,
	location VARCHAR,
	size BIGINT NOT NULL,
	blob VARCHAR,
	meta JSON,
	width INTEGER,
	height INTEGER,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (thread_id, path),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_files_thread_created ON files (thread_id, created_at)
;
CREATE INDEX ix_files_thread_parent ON files (thread_id, parent)
;
CREATE TABLE file_versions (
	seq INTEGER NOT NULL,
	thread_id VARCHAR NOT NULL,
	path VARCHAR NOT NULL,
	op VARCHAR NOT NULL,
	is_directory BOOLEAN NOT NULL,
	mime_type VARCHAR NOT NULL,
	storage VARCHAR NOT NULL,
	location VARCHAR,
	size BIGINT NOT NULL,
	blob VARCHAR,
	meta JSON,
	width INTEGER,
	height INTEGER,
	file_created_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (seq),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_file_versions_thread_created ON file_versions (thread_id, created_at)
;
CREATE INDEX ix_file_versions_thread_path ON file_versions (thread_id, path, seq)
;
CREATE TABLE state_versions (
	seq INTEGER NOT NULL,
	thread_id VARCHAR NOT NULL,
	kind VARCHAR NOT NULL,
	"key" VARCHAR NOT NULL,
	value JSON,
	deleted BOOLEAN NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (seq),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_state_versions_thread_created ON state_versions (thread_id, created_at)
;
CREATE INDEX ix_state_versions_thread_key ON state_versions (thread_id, kind, "key", seq)
;
CREATE TABLE thread_lineage (
	id VARCHAR NOT NULL,
	kind VARCHAR NOT NULL,
	thread_id VARCHAR NOT NULL,
	source_id VARCHAR,
	message_id VARCHAR,
	data JSON,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_thread_lineage_source_created ON thread_lineage (source_id, created_at)
;
CREATE INDEX ix_thread_lineage_thread_created ON thread_lineage (thread_id, created_at)
;
CREATE TABLE queue (
	seq INTEGER NOT NULL,
	id VARCHAR NOT NULL,
	thread_id VARCHAR NOT NULL,
	role VARCHAR NOT NULL,
	content VARCHAR NOT NULL,
	attachments JSON,
	silent BOOLEAN NOT NULL,
	meta JSON,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (seq),
	UNIQUE (id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_queue_thread_created ON queue (thread_id, created_at)
;
CREATE TABLE effects (
	id VARCHAR NOT NULL,
	thread_id VARCHAR NOT NULL,
	name VARCHAR NOT NULL,
	args JSON,
	scheduled_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	status VARCHAR NOT NULL,
	error VARCHAR,
	started_at BIGINT,
	finished_at BIGINT,
	attempts INTEGER NOT NULL,
	owner VARCHAR,
	PRIMARY KEY (id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_effects_status_scheduled ON effects (status, scheduled_at)
;
CREATE INDEX ix_effects_thread_created ON effects (thread_id, created_at)
;
CREATE TABLE children (
	parent_id VARCHAR NOT NULL,
	reference VARCHAR NOT NULL,
	entry JSON,
	created_at BIGINT NOT NULL,
	hidden_by VARCHAR,
	PRIMARY KEY (parent_id, reference),
	FOREIGN KEY(parent_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_children_parent_created ON children (parent_id, created_at)
;
CREATE TABLE env_requests (
	id VARCHAR NOT NULL,
	parent_id VARCHAR NOT NULL,
	payload JSON,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(parent_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_env_requests_parent_created ON env_requests (parent_id, created_at)
;
CREATE TABLE thread_values (
	thread_id VARCHAR NOT NULL,
	"key" VARCHAR NOT NULL,
	value JSON,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (thread_id, "key"),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_thread_values_key ON thread_values ("key")
;
CREATE INDEX ix_thread_values_thread_created ON thread_values (thread_id, created_at)
;
CREATE TABLE executions (
	thread_id VARCHAR NOT NULL,
	status VARCHAR NOT NULL,
	record JSON,
	claimed_by VARCHAR,
	claimed_until BIGINT,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (thread_id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE TABLE thread_leases (
	thread_id VARCHAR NOT NULL,
	owner VARCHAR NOT NULL,
	expires_at BIGINT NOT NULL,
	acquired_at BIGINT NOT NULL,
	PRIMARY KEY (thread_id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_thread_leases_expires ON thread_leases (expires_at)
;
CREATE TABLE store_vectors (
	seq INTEGER NOT NULL,
	model VARCHAR NOT NULL,
	embedding BLOB NOT NULL,
	PRIMARY KEY (seq),
	FOREIGN KEY(seq) REFERENCES store_items (seq) ON DELETE CASCADE
)
;
CREATE TABLE a2a_push (
	task_id VARCHAR NOT NULL,
	config_id VARCHAR NOT NULL,
	thread_id VARCHAR NOT NULL,
	config JSON,
	state VARCHAR,
	version INTEGER NOT NULL,
	pending BOOLEAN NOT NULL,
	watching BOOLEAN NOT NULL,
	attempts INTEGER NOT NULL,
	next_at BIGINT NOT NULL,
	claimed_until BIGINT,
	seen_at BIGINT NOT NULL,
	last_error VARCHAR,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (task_id, config_id),
	FOREIGN KEY(thread_id) REFERENCES threads (id) ON DELETE CASCADE
)
;
CREATE INDEX ix_a2a_push_due ON a2a_push (pending, next_at)
;
CREATE INDEX ix_a2a_push_thread ON a2a_push (thread_id)
;
CREATE INDEX ix_a2a_push_watching ON a2a_push (watching)
