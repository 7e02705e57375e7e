"""Hand-written mutants of the invariants, each with the tests that must kill it.

Each mutant is one production-code change that breaks one rule of docs/architecture.md while
leaving the code importable: the original snippet (which must occur exactly once in its
file), what replaces it, and the pytest node ids that must fail once it is applied.
``scripts/mutants.py`` (``make mutants``) applies each to a copy of the repository, runs
its tests and writes ``build/mutation.json``; a survivor means a rule no test guards.

The tests named here are behavioural (HTTP API or service objects), so a mutant whose
snippet moves when the code is refactored needs its snippet updated, not its tests.
This module holds data only; pytest collects nothing from this folder.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    #: Repository-relative path of the file to change.
    path: str
    #: Exact source text to replace; must occur exactly once in the file.
    original: str
    replacement: str
    #: pytest node ids, every one of which must fail with the mutant applied.
    kill: tuple[str, ...]
    #: The rule the mutant breaks.
    description: str = ""


TENANT_API = "tests/api/test_tenant_from_token_only.py"
RACE = "tests/integration/test_idempotency_race.py"
WINDOW = "tests/integration/test_before_the_purge.py"
REBUILD = "tests/integration/test_embedded_rebuild.py"
PROVENANCE = "tests/integration/test_provenance.py"
SECRET_PATTERNS = "tests/unit/test_secret_patterns.py"
REPLAY = "tests/integration/test_replay_after_delete.py"
RECLASSIFIED = "tests/api/test_reclassified_reads.py"
SECRETS_EVERYWHERE = "tests/integration/test_secrets_everywhere.py"

MEMORY_PORT = "tests/storage/test_memory_port.py"
SESSIONS_PORT = "tests/storage/test_sessions_port.py"
RUNS_PORT = "tests/storage/test_runs_port.py"
CONCURRENCY = "tests/integration/test_concurrency.py"
SQLITE_MEMORY = "layers/memvault/storage/sqlite/memory.py"
OWNERSHIP = "tests/integration/test_fact_ownership.py"
SESSION_LIMITS = "tests/integration/test_session_sensitivity.py"
FORGET_WINDOW = (
    "test_a_forgotten_subjects_sessions_runs_and_artifacts_are_gone_at_once_and_the_purge_"
    "keeps_what_came_after"
)

#: The embedded store guards the same invariants with SQL inside one transaction; each of
#: its conditions has a mutant too, killed by the SQLite variants of the same tests.
SQLITE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        id="sqlite-version-compare-and-set-dropped",
        path=SQLITE_MEMORY,
        original=(
            "        elif chain is None or not chain.live or chain.current_version "
            "!= new.expected_version:\n"
        ),
        replacement="        elif chain is None:\n",
        kill=(
            f"{MEMORY_PORT}::test_of_many_writers_at_one_version_exactly_one_wins[sqlite]",
            f"{MEMORY_PORT}::test_a_correction_supersedes_the_previous_version_by_compare_and_set"
            "[sqlite]",
        ),
        description="the embedded store extends a chain whatever version its head holds",
    ),
    Mutant(
        id="sqlite-epoch-check-dropped",
        path=SQLITE_MEMORY,
        original="        if _epoch(conn, t, s) != m.subject_epoch:\n",
        replacement="        if False:\n",
        kill=(f"{MEMORY_PORT}::test_a_write_from_a_retired_epoch_is_refused[sqlite]",),
        description="a write that lost the race with a forget is stored in the retired epoch",
    ),
    Mutant(
        id="sqlite-tombstone-skips-current-version",
        path=SQLITE_MEMORY,
        original=(
            "            _put_version(\n"
            "                conn,\n"
            "                {\n"
            "                    **old,\n"
            '                    "status": MemoryStatus.DELETED.value,\n'
        ),
        replacement=(
            "            (lambda *_: None)(\n"
            "                conn,\n"
            "                {\n"
            "                    **old,\n"
            '                    "status": MemoryStatus.DELETED.value,\n'
        ),
        kill=(
            f"{MEMORY_PORT}::test_a_tombstone_blocks_the_chain_and_releases_the_pointer[sqlite]",
        ),
        description="the embedded delete tombstones the chain head but leaves the version active",
    ),
    Mutant(
        id="sqlite-tombstone-skips-chain-head",
        path=SQLITE_MEMORY,
        original=(
            '                "UPDATE memory_chains SET state = ?, deletion_id = ?, updated_at = ?, '
            'ttl = NULL "\n'
        ),
        replacement=(
            '                "UPDATE memory_chains SET deletion_id = ?, deletion_id = ?, '
            'updated_at = ?, ttl = NULL "\n'
        ),
        kill=(
            f"{MEMORY_PORT}::test_a_tombstone_blocks_the_chain_and_releases_the_pointer[sqlite]",
        ),
        description="the embedded delete marks the version but leaves the chain head live",
    ),
    Mutant(
        id="sqlite-session-append-sequence-unchecked",
        path="layers/memvault/storage/sqlite/sessions.py",
        original='            elif head is None or int(head["last_seq"]) != new.seq - 1:\n',
        replacement="            elif head is None:\n",
        kill=(f"{SESSIONS_PORT}::test_an_append_behind_or_ahead_of_the_head_is_refused[sqlite]",),
        description="an append ahead of the head is stored, leaving a gap in the sequence "
        "(a second append at the same number is still refused by the message's own slot)",
    ),
    Mutant(
        id="sqlite-run-advance-version-unchecked",
        path="layers/memvault/storage/sqlite/runs.py",
        original=(
            "            if _head_version(conn, tenant_id, cp.run_id) != step.expected_version:\n"
        ),
        replacement="            if False:\n",
        kill=(
            f"{RUNS_PORT}::test_an_advance_at_a_stale_version_is_refused_and_writes_nothing[sqlite]",
        ),
        description="a run advances from a version it no longer holds (racing writers are "
        "still refused by the version row each would create, so only a stale writer shows it)",
    ),
)

MUTANTS: tuple[Mutant, ...] = (
    # 1. The tenant comes from the verified identity only, never from a header.
    Mutant(
        id="tenant-from-x-tenant-id-header",
        path="layers/memvault/api/access.py",
        original="    return Claims.parse(context).access_context()\n",
        replacement=(
            "    headers = {k.lower(): v for k, v in (event.headers or {}).items()}\n"
            '    tenant = headers.get("x-tenant-id") or context["tenant_id"]\n'
            '    return Claims.parse({**context, "tenant_id": tenant}).access_context()\n'
        ),
        kill=(
            f"{TENANT_API}::test_a_tenant_header_does_not_move_a_write_to_another_tenant[dynamodb]",
            f"{TENANT_API}::test_a_tenant_header_does_not_reach_another_tenants_memories[dynamodb]",
            f"{TENANT_API}::test_the_local_gateway_adapter_takes_the_tenant_from_the_token_only[dynamodb]",
        ),
        description="the handler's access context prefers an X-Tenant-Id header",
    ),
    Mutant(
        id="tenant-from-x-memvault-tenant-header",
        path="layers/memvault/api/access.py",
        original="    return Claims.parse(context).access_context()\n",
        replacement=(
            "    raw = dict(context)\n"
            "    for name, value in (event.headers or {}).items():\n"
            '        if name.lower() == "x-memvault-tenant":\n'
            '            raw["tenant_id"] = value\n'
            "    return Claims.parse(raw).access_context()\n"
        ),
        kill=(
            f"{TENANT_API}::test_a_tenant_header_does_not_move_a_write_to_another_tenant[dynamodb]",
            f"{TENANT_API}::test_a_tenant_header_does_not_reach_another_tenants_memories[dynamodb]",
        ),
        description="the handler's access context takes the tenant from x-memvault-tenant",
    ),
    Mutant(
        id="local-adapter-tenant-from-header",
        path="local/memvault_local/adapter.py",
        original=(
            "                claims = self.verifier.verify("
            'bearer_token(request.headers.get("Authorization")))\n'
        ),
        replacement=(
            "                claims = self.verifier.verify("
            'bearer_token(request.headers.get("Authorization")))\n'
            '                if request.headers.get("X-Tenant-Id"):\n'
            "                    claims = claims.model_copy(\n"
            '                        update={"tenant_id": request.headers["X-Tenant-Id"]}\n'
            "                    )\n"
        ),
        kill=(
            f"{TENANT_API}::test_the_local_gateway_adapter_takes_the_tenant_from_the_token_only[dynamodb]",
        ),
        description="the local API Gateway stand-in lets a header override the token's tenant",
    ),
    # 2. One memory per request id, enforced inside the write's transaction.
    Mutant(
        id="idempotency-record-unconditional",
        path="layers/memvault/storage/dynamodb/memory.py",
        original=(
            '                    "Item": to_item(version_item),\n'
            '                    "ConditionExpression": "attribute_not_exists(pk)",\n'
        ),
        replacement='                    "Item": to_item(version_item),\n',
        kill=(
            f"{RACE}::test_racing_retries_without_a_canonical_key_store_one_memory[dynamodb]",
            f"{RACE}::test_racing_retries_for_a_new_canonical_key_store_one_memory[dynamodb]",
        ),
        description="the version (an idempotent write's record) is written without its "
        "attribute_not_exists condition: racing retries of one request store several memories",
    ),
    # 3. A forgotten subject is unreadable at once, recall included.
    Mutant(
        id="recall-ignores-subject-epoch",
        path="layers/memvault/services/recall.py",
        original="            and m.subject_epoch == epoch\n",
        replacement="",
        kill=(
            f"{WINDOW}::test_a_forgotten_subject_is_recalled_nowhere_before_the_purge_runs[dynamodb]",
            f"{WINDOW}::test_a_forgotten_subject_is_recalled_nowhere_before_the_purge_runs[sqlite]",
        ),
        description="recall's re-validation drops the subject-epoch check",
    ),
    Mutant(
        id="recall-ignores-status",
        path="layers/memvault/services/recall.py",
        original="            and m.status is MemoryStatus.ACTIVE\n",
        replacement="",
        kill=(
            f"{WINDOW}::test_a_deleted_memory_is_served_nowhere_before_its_purge_runs[dynamodb]",
            f"{WINDOW}::test_deleting_by_an_old_version_id_blocks_the_whole_chain_before_the_purge[dynamodb]",
        ),
        description="recall's re-validation drops the status check (a deleted or candidate "
        "version the index still holds comes back)",
    ),
    # 4. A delete blocks every version at once, before the purge.
    Mutant(
        id="tombstone-skips-current-version",
        path="layers/memvault/storage/dynamodb/memory.py",
        # The transaction item is built but never added.
        original='        tx.add("current", self._deleted_current(chain, pk, deletion_id, at))\n',
        replacement=(
            '        (lambda *_: None)("current", '
            "self._deleted_current(chain, pk, deletion_id, at))\n"
        ),
        kill=(
            f"{WINDOW}::test_a_deleted_memory_is_served_nowhere_before_its_purge_runs[dynamodb]",
            f"{WINDOW}::test_deleting_by_an_old_version_id_blocks_the_whole_chain_before_the_purge[dynamodb]",
        ),
        description="the delete tombstones the chain head but leaves the current version "
        "active: list and recall serve it until the purge runs",
    ),
    Mutant(
        id="tombstone-skips-chain-head",
        path="layers/memvault/storage/dynamodb/memory.py",
        original='        tx.add("chain", self._tombstoned_head(chain, pk, deletion_id, at))\n',
        replacement=(
            '        (lambda *_: None)("chain", '
            "self._tombstoned_head(chain, pk, deletion_id, at))\n"
        ),
        kill=(
            f"{WINDOW}::test_a_deleted_memory_is_served_nowhere_before_its_purge_runs[dynamodb]",
            f"{WINDOW}::test_deleting_by_an_old_version_id_blocks_the_whole_chain_before_the_purge[dynamodb]",
        ),
        description="the delete marks the current version but not the chain head: a "
        "retry of an older version's write request still answers it until the purge runs",
    ),
    Mutant(
        id="recall-reads-purged-tombstones",
        path="layers/memvault/services/recall.py",
        original=(
            "            if found is None or found.memory is None or found.chain_id in seen:\n"
        ),
        replacement="            if found is None or found.chain_id in seen:\n",
        kill=(
            f"{WINDOW}::test_when_only_the_index_step_fails"
            "_the_live_document_left_behind_is_never_served[dynamodb]",
        ),
        description="recall's re-validation reads a purged (ids-only) version as a memory "
        "(recall fails instead of dropping the index's leftover document)",
    ),
    # 5. A rebuilt index keeps deleted chains dead (tombstones), embedded backend included.
    Mutant(
        id="rebuild-skips-tombstones",
        path="layers/memvault/indexing/rebuild.py",
        original="        if op is None:\n            continue\n",
        replacement="        if op is None or not op.live:\n            continue\n",
        kill=(
            f"{REBUILD}::test_a_rebuilt_index_refuses_a_replayed_insert_of_a_deleted_memory",
            f"{REBUILD}::test_a_rebuilt_index_keeps_a_deleted_chain_dead_whichever_version_replays",
        ),
        description="the rebuild writes live documents only: no tombstone for deleted "
        "chains, so a late replayed INSERT resurrects the content",
    ),
    Mutant(
        id="rebuild-no-tombstone-for-deleted-chain-heads",
        path="layers/memvault/search/documents.py",
        original='        if item.get("state") == "live" or "current_version" not in item:\n',
        replacement="        if True:  # mutant: a deleted chain head gives no tombstone\n",
        kill=(
            f"{REBUILD}::test_a_rebuilt_index_refuses_a_replayed_insert_of_a_deleted_memory",
            f"{REBUILD}::test_a_rebuilt_index_keeps_a_deleted_chain_dead_whichever_version_replays",
        ),
        description="a deleted chain's head yields no tombstone op when the table is rescanned",
    ),
    Mutant(
        id="embedded-index-tombstones-do-not-guard",
        path="layers/memvault/search/embedded.py",
        original="                if held is not None and held[1] >= op.version:\n",
        replacement=(
            "                if held is not None and held[1] >= op.version and not op.live:\n"
        ),
        kill=(
            f"{REBUILD}::test_a_rebuilt_index_refuses_a_replayed_insert_of_a_deleted_memory",
            f"{REBUILD}::test_a_rebuilt_index_keeps_a_deleted_chain_dead_whichever_version_replays",
        ),
        description="the embedded index lets a live write replace a tombstone, whatever its "
        "external version",
    ),
    Mutant(
        id="embedded-index-ranks-unfiltered-rows",
        path="layers/memvault/search/embedded.py",
        original="                mask = subject.admitted(flt)\n",
        replacement="                mask = subject.used.copy()\n",
        kill=(
            "tests/unit/test_embedded_index.py::test_both_queries_admit_exactly_what_the_filter_admits",
        ),
        description="the embedded index ranks every row of the subject, not only those the "
        "hard filter admits",
    ),
    # The write policy holds under concurrency: no scan runs without its plugins.
    Mutant(
        id="secret-scan-unconfigured",
        path="layers/memvault/policy/secrets.py",
        original="    _configure()\n    for field, text in fields:\n",
        replacement="    for field, text in fields:\n",
        kill=(
            # An AWS key id: only detect-secrets' plugins know that format.
            f"{SECRET_PATTERNS}::test_a_credential_the_probe_stored_is_found"
            "[AKIA\\u200bIOSFODNN7EXAMPLF]",
            "tests/unit/test_write_policy.py::test_concurrent_writes_never_skip_the_secret_scan",
        ),
        description="scans run on detect-secrets' unconfigured settings (no plugins): "
        "credentials are stored",
    ),
    # 6. Only the subject's own activity appends to, and renews, their session.
    Mutant(
        id="session-append-without-subject-check",
        path="layers/memvault/services/sessions.py",
        original=(
            "        ctx.require(Scope.SESSIONS_WRITE)\n"
            "        ctx.require_subject(subject_id)\n"
            "        if msg.role is Role.SYSTEM:\n"
        ),
        replacement=(
            "        ctx.require(Scope.SESSIONS_WRITE)\n        if msg.role is Role.SYSTEM:\n"
        ),
        kill=(
            "tests/integration/test_sessions.py"
            "::test_another_subjects_token_cannot_append_nor_renew_the_idle_clock[dynamodb]",
            "tests/api/test_sessions_runs_context_api.py"
            "::test_another_subjects_token_is_refused_a_sessions_append[sqlite]",
        ),
        description="a token for another subject appends to the session and renews its idle clock",
    ),
    # 7. Only what a caller may read, it may change.
    Mutant(
        id="fact-superseded-without-read-check",
        path="layers/memvault/services/memory.py",
        original=(
            "        if head is not None and not ctx.may_read(head.sensitivity, head.visibility):\n"
        ),
        replacement="        if head is None and head is not None:\n",
        kill=(
            f"{OWNERSHIP}::test_a_fact_above_the_callers_ceiling_cannot_be_superseded_or_probed"
            "[sqlite]",
            f"{OWNERSHIP}::test_a_fact_outside_the_callers_visibility_cannot_be_superseded"
            "[dynamodb]",
        ),
        description="a token below a fact's ceiling or outside its visibility supersedes it",
    ),
    # 8. Session memory answers to the reader's sensitivity ceiling.
    Mutant(
        id="session-read-ignores-the-ceiling",
        path="layers/memvault/services/sessions.py",
        original="    return ctx.may_read(sensitivity, [])\n",
        replacement="    return True\n",
        kill=(
            f"{SESSION_LIMITS}::test_a_reader_sees_only_the_messages_its_ceiling_admits[sqlite]",
            f"{SESSION_LIMITS}::test_context_assembly_leaves_out_session_messages_above_the_ceiling"
            "[dynamodb]",
        ),
        description="a public-ceiling token reads personal data from a session",
    ),
    Mutant(
        id="session-append-skips-the-pii-policy",
        path="layers/memvault/services/sessions.py",
        original='    pii = find_pii([("content", content)])\n',
        replacement="    pii = []\n",
        kill=(
            f"{SESSION_LIMITS}::test_personal_data_in_a_message_needs_consent_and_nothing_is_kept"
            "_without_it[sqlite]",
            f"{SESSION_LIMITS}::test_a_reader_sees_only_the_messages_its_ceiling_admits[dynamodb]",
        ),
        description="personal data enters a session without consent and unclassified",
    ),
    # 10. Provenance comes from the verified identity.
    Mutant(
        id="any-caller-claims-any-provenance",
        path="layers/memvault/services/memory.py",
        original="        provenance.check_claim(ctx, cmd.source)\n",
        replacement="",
        kill=(
            f"{PROVENANCE}::test_an_agent_may_not_claim_a_persons_confirmation"
            "[dynamodb-user_confirmed]",
            f"{PROVENANCE}::test_the_user_may_confirm_but_only_a_reviewer_may_claim_human_review"
            "[sqlite]",
        ),
        description="an agent token writes user_confirmed or human_review memories",
    ),
    Mutant(
        id="an-agent-confirms-its-own-candidate",
        path="layers/memvault/services/memory.py",
        original="            provenance.check_confirm(ctx)\n",
        replacement="            pass\n",
        kill=(
            f"{PROVENANCE}::test_an_agent_cannot_mark_its_own_inference_active_over_an_active"
            "_memory[sqlite]",
        ),
        description="an agent marks its own model_inferred correction active over an active "
        "memory (a candidate turned active is also refused by check_supersede)",
    ),
    Mutant(
        id="an-edit-keeps-the-old-source",
        path="layers/memvault/policy/provenance.py",
        original="    if not content_changed:\n        return current\n",
        replacement="    return current\n",
        kill=(
            f"{PROVENANCE}::test_an_agents_unconfirmed_edit_may_not_replace_the_users_memory"
            "[dynamodb]",
        ),
        description="an agent rewrites a user's confirmed memory and keeps the user's source",
    ),
    # 11. Credentials are found in every stored text field, however they are written.
    Mutant(
        id="secret-scan-reads-raw-text",
        path="layers/memvault/policy/secrets.py",
        original="    clean = normalise(text)\n",
        replacement="    clean = text\n",
        kill=(
            f"{SECRET_PATTERNS}::test_a_credential_the_probe_stored_is_found"
            "[AKIA\\u200bIOSFODNN7EXAMPLF]",
        ),
        description="a key id split by a zero-width space, or in full-width letters, is stored",
    ),
    Mutant(
        id="run-state-is-not-scanned",
        path="layers/memvault/services/runs.py",
        original='            *structured_fields(body.state or {}, "state"),\n',
        replacement="",
        kill=(
            f"{SECRETS_EVERYWHERE}::test_a_checkpoint_carrying_a_credential_is_refused"
            "[sqlite-changes1-state.notes[1].db]",
        ),
        description="a credential inside a run's state is stored with the checkpoint",
    ),
    Mutant(
        id="old-versions-judged-alone",
        path="layers/memvault/services/memory.py",
        # A version is judged by its own classification only, not also by its fact's.
        original="            and self._readable(ctx, current, epoch, now)\n",
        replacement="",
        kill=(
            f"{RECLASSIFIED}::test_older_versions_of_a_fact_whose_current_version_expired_are"
            "_not_exported[sqlite]",
        ),
        description="export serves the older versions of a fact whose current version "
        "expired (versions judged without their fact's current one)",
    ),
    Mutant(
        id="raise-forgotten-once-lowered",
        path="layers/memvault/services/memory.py",
        # Only a version's own classification and the current one's count, not those between.
        original="            m.version > cut\n            and self",
        replacement="            True\n            and self",
        kill=(
            f"{RECLASSIFIED}::test_a_fact_lowered_again_keeps_what_its_raise_withheld"
            "[sqlite-raised to pii, then public with new content]",
        ),
        description="history and export serve version 1 again once a fact raised to pii "
        "(same text) is lowered with redacted text (probe 8, M1)",
    ),
    Mutant(
        id="replay-ignores-the-ceiling",
        path="layers/memvault/services/memory.py",
        original="            or not ctx.may_read(memory.sensitivity, memory.visibility)\n",
        replacement="",
        # (An older version above the caller is also withheld by its fact's cut, which
        # replay-ignores-what-a-raise-withheld breaks; this check is the current version's.)
        kill=(
            f"{REPLAY}::test_a_replay_never_hands_a_memory_to_a_caller_below_its_sensitivity"
            "[sqlite]",
        ),
        description="a caller below a memory's sensitivity gets it back by replaying its request",
    ),
    Mutant(
        id="any-caller-appends-system-messages",
        path="layers/memvault/services/sessions.py",
        original="            provenance.check_system_message(ctx)\n",
        replacement="            pass\n",
        kill=(
            "tests/integration/test_sessions.py"
            "::test_only_the_tenants_service_may_append_system_messages[dynamodb]",
        ),
        description="an agent passes its own text off as the platform's system instructions",
    ),
    # 9. No input answers 500.
    Mutant(
        id="deep-json-reaches-the-parser",
        path="layers/memvault/api/app.py",
        original="    if _json_depth(body) <= MAX_JSON_DEPTH:\n",
        replacement="    if True:\n",
        kill=(
            "tests/api/test_odd_inputs.py"
            "::test_json_nested_2000_levels_is_refused_before_it_is_parsed[sqlite]",
        ),
        description="JSON nested 2,000 levels reaches the parser and answers 500",
    ),
    # 10. Stored text is data in working memory.
    Mutant(
        id="memory-text-verbatim-in-context",
        path="layers/memvault/services/context.py",
        original='            f"({m.kind.value}{key}) {as_data(m.content)}",\n',
        replacement='            f"({m.kind.value}{key}) {m.content}",\n',
        kill=(
            "tests/integration/test_context_injection.py"
            "::test_stored_text_cannot_forge_a_section_a_policy_or_a_turn[sqlite]",
        ),
        description="a memory's text starts a '### policy' section of its own in the context",
    ),
    Mutant(
        id="run-ids-shared-across-subjects",
        path="layers/memvault/storage/ports/runs.py",
        original='    return f"{subject_id}/{run_id}"\n',
        replacement="    return run_id\n",
        kill=(
            "tests/integration/test_runs.py"
            "::test_run_ids_are_scoped_by_subject_so_another_subjects_id_tells_nothing[sqlite]",
        ),
        description="another subject's run id shows through a 409 on create",
    ),
    Mutant(
        id="unfinished-deletions-never-resumed",
        path="layers/memvault/services/deletion.py",
        original="    jobs = runner.unfinished(tenant_id)\n",
        replacement="    jobs: list[DeletionJob] = []\n",
        kill=(
            "tests/integration/test_local_store.py"
            "::test_a_deletion_a_crash_cut_short_is_finished_by_resume",
            "tests/integration/test_fault_harness.py"
            "::test_the_fault_harness_holds_over_every_seed[sqlite]",
        ),
        description="a purge a crash cut short stays BLOCKED for ever; the data stays on disk",
    ),
    Mutant(
        id="artifact-above-ceiling-deletable",
        path="layers/memvault/services/artifacts.py",
        original="            or not ctx.may_read(record.sensitivity, [])\n",
        replacement="",
        kill=(
            "tests/integration/test_artifacts.py"
            "::test_an_artifact_above_the_callers_ceiling_is_absent_on_every_route[dynamodb]",
        ),
        description="a token below an artifact's ceiling replays, commits or deletes it",
    ),
    Mutant(
        id="agent-forgets-what-it-cannot-read",
        path="layers/memvault/services/memory.py",
        original="        self._require_reads_all(ctx, subject_id)\n",
        replacement="",
        kill=(
            "tests/integration/test_fact_ownership.py"
            "::test_an_agent_forgets_a_subject_only_when_it_may_read_every_memory[sqlite]",
        ),
        description="an agent below a memory's ceiling forgets the whole subject",
    ),
    Mutant(
        id="session-ended-below-its-ceiling",
        path="layers/memvault/services/sessions.py",
        original="        if withheld:\n",
        replacement="        if False:\n",
        kill=(
            "tests/integration/test_session_sensitivity.py"
            "::test_a_token_below_the_session_may_neither_end_it_nor_replace_its_summary[sqlite]",
        ),
        description="a token below a session's messages ends (deletes) it",
    ),
    Mutant(
        id="forgotten-session-read-before-its-purge",
        path="layers/memvault/services/sessions.py",
        original="        if found is None or self._forgotten(found.head):\n"
        '            raise NotFound(_NOT_FOUND, {"session_id": session_id})\n',
        replacement="        if found is None:\n"
        '            raise NotFound(_NOT_FOUND, {"session_id": session_id})\n',
        kill=(f"{WINDOW}::{FORGET_WINDOW}[sqlite]", f"{WINDOW}::{FORGET_WINDOW}[dynamodb]"),
        description="a forgotten subject's session is served until the purge runs",
    ),
    Mutant(
        id="forgotten-run-read-before-its-purge",
        path="layers/memvault/services/runs.py",
        original="        if forgets.covers(cp.subject_epoch, cp.created_at):\n",
        replacement="        if False:\n",
        kill=(f"{WINDOW}::{FORGET_WINDOW}[sqlite]", f"{WINDOW}::{FORGET_WINDOW}[dynamodb]"),
        description="a forgotten subject's run state is served until the purge runs",
    ),
    Mutant(
        id="forgotten-artifact-read-before-its-purge",
        path="layers/memvault/services/artifacts.py",
        original="            or self._forgotten(record)\n",
        replacement="",
        kill=(f"{WINDOW}::{FORGET_WINDOW}[sqlite]", f"{WINDOW}::{FORGET_WINDOW}[dynamodb]"),
        description="a forgotten subject's artifact (and a download URL) is served until "
        "the purge runs",
    ),
    Mutant(
        id="run-made-after-a-forget-under-the-retired-epoch",
        path="layers/memvault/services/runs.py",
        original="            subject_epoch=forgets.epoch,\n",
        replacement="            subject_epoch=forgets.epoch - 1,\n",
        kill=(f"{WINDOW}::{FORGET_WINDOW}[sqlite]",),
        description="a run created right after a forget counts as the forget's and is lost",
    ),
    Mutant(
        id="forget-stamped-before-what-came-after-the-last",
        path="layers/memvault/services/memory.py",
        original="            at = made_after_forget(\n"
        "                self.clock.now(), self.repo.forgotten_at(ctx.tenant_id, subject_id)\n"
        "            )\n",
        replacement="            at = self.clock.now()\n",
        kill=(
            f"{WINDOW}::test_a_second_forget_in_the_same_instant_covers_what_came_between[sqlite]",
        ),
        description="a second forget misses what was begun after the first",
    ),
    Mutant(
        id="sqlite-purge-takes-sessions-begun-after-the-forget",
        path="layers/memvault/storage/sqlite/sessions.py",
        original='    "ELSE subject_epoch > ? END"\n',
        replacement='    "ELSE subject_epoch > ? AND 0 END"\n',
        kill=(
            f"{SESSIONS_PORT}::test_a_forget_takes_the_sessions_of_its_retired_epoch_whatever_"
            "their_time[sqlite]",
            f"{WINDOW}::{FORGET_WINDOW}[sqlite]",
        ),
        description="a forget's purge deletes sessions the subject began after it",
    ),
    Mutant(
        id="sqlite-reference-to-a-forgotten-artifact",
        path="layers/memvault/storage/sqlite/artifacts.py",
        original='        mine = made_after is None or row["created_at"] > iso(made_after)',
        replacement="        mine = True",
        kill=(
            "tests/storage/test_artifacts_port.py"
            "::test_a_reference_to_an_artifact_made_by_the_last_forget_is_refused[sqlite]",
        ),
        description="a memory or run written after a forget names an artifact of the forget's",
    ),
    Mutant(
        id="forget-leaves-recall-traces",
        path="layers/memvault/services/deletion.py",
        original="            gone = self.traces.forget_subject(\n"
        "                job.tenant_id, job.subject_id, job.requested_at, retired_epoch(job)\n"
        "            )\n",
        replacement="            gone = 0\n",
        kill=(
            "tests/integration/test_traces.py"
            "::test_forgetting_a_subject_removes_their_traces_and_the_job_lists_the_copy[sqlite]",
            "tests/integration/test_traces.py"
            "::test_forgetting_a_subject_removes_their_traces_and_the_job_lists_the_copy[dynamodb]",
        ),
        description="a forgotten subject's recall traces and feedback outlive the forget",
    ),
    Mutant(
        id="forget-keeps-overlapping-recall-traces",
        path="layers/memvault/services/deletion.py",
        original="job.tenant_id, job.subject_id, job.requested_at, retired_epoch(job)\n",
        replacement="job.tenant_id, job.subject_id, job.requested_at, None\n",
        kill=(
            "tests/integration/test_traces.py"
            "::test_a_recall_that_overlapped_a_forget_leaves_no_trace[dynamodb]",
        ),
        description="a recall that ran alongside a forget keeps its trace and served links "
        "(fresh probe of stop 46, F1)",
    ),
    Mutant(
        id="late-trace-of-a-retired-epoch-written",
        path="layers/memvault/storage/sqlite/traces.py",
        original="            if _retired(conn, owner, trace.subject_epoch, current):\n",
        replacement="            if False:\n",
        kill=(
            "tests/storage/test_traces_port.py"
            "::test_a_record_judged_under_a_retired_epoch_is_not_kept[sqlite]",
        ),
        description="a trace reaching the file after a forget retired its epoch is written",
    ),
    Mutant(
        id="late-feedback-of-a-retired-epoch-written",
        path="layers/memvault/storage/sqlite/traces.py",
        original="            if _retired(conn, owner, feedback.subject_epoch, {}):\n",
        replacement="            if False:\n",
        kill=(
            "tests/storage/test_traces_port.py"
            "::test_a_record_judged_under_a_retired_epoch_is_not_kept[sqlite]",
        ),
        description="feedback reaching the file after a forget retired its epoch is written "
        "(fresh probe of stop 46, N1)",
    ),
    Mutant(
        id="late-trace-of-a-retired-epoch-kept-on-dynamodb",
        path="layers/memvault/storage/dynamodb/traces.py",
        original="        if subject_epoch(self.db, tenant_id, subject_id) > judged_under:\n",
        replacement="        if False:\n",
        kill=(
            "tests/storage/test_traces_port.py"
            "::test_a_record_judged_under_a_retired_epoch_is_not_kept[dynamodb]",
        ),
        description="on DynamoDB, a trace or feedback written after a forget retired its "
        "epoch (and its purge's traces step ran) is kept",
    ),
    Mutant(
        id="trace-keeps-what-a-forget-retired",
        path="layers/memvault/services/recall.py",
        original=(
            '        return hidden | {d.chain_id for d in drops if d.reason == "other_epoch"}\n'
        ),
        replacement="        return hidden\n",
        kill=(
            "tests/integration/test_traces.py"
            "::test_a_recall_after_a_forget_keeps_nothing_of_what_the_forget_retired[sqlite]",
        ),
        description="a recall between a forget and its purge keeps the retired memories' "
        "ids and counts in a trace that outlives the purge (fresh probe of stop 47)",
    ),
    Mutant(
        id="embedded-bm25-counts-hidden-memories",
        path="layers/memvault/search/embedded.py",
        original="        count = int(np.count_nonzero(mask))\n",
        replacement="        count = self.count\n",
        kill=(
            "tests/integration/test_keyword_statistics.py"
            "::test_hidden_and_foreign_memories_move_no_score[embedded-sqlite-keyword]",
        ),
        description="the embedded index counts BM25's documents over the whole subject: "
        "a hidden memory moves the reader's scores (fresh probe of stop 49)",
    ),
    Mutant(
        id="opensearch-keyword-weighs-by-the-shard",
        path="layers/memvault/search/opensearch.py",
        original=(
            '                    {"constant_score": {"filter": _word_clause(w, cjk), '
            '"boost": weight}}\n'
        ),
        replacement='                    {"match": {"content": {"query": w, "boost": weight}}}\n',
        kill=(
            "tests/integration/test_keyword_statistics.py"
            "::test_hidden_and_foreign_memories_move_no_score[opensearch-sqlite-keyword]",
        ),
        description="OpenSearch's keyword search scores by the shard's BM25 statistics: "
        "another tenant's memory moves the reader's scores",
    ),
    Mutant(
        id="query-words-stemmed-unlike-the-index",
        path="layers/memvault/search/text.py",
        original=(
            '    for word, stem in zip(words, _stemmer("porter").stemWords(words), strict=True):\n'
        ),
        replacement="    for word, stem in zip(words, _stemmer().stemWords(words), strict=True):\n",
        kill=(
            "tests/integration/test_opensearch_query_words.py"
            "::test_words_the_index_stems_alike_count_once",
        ),
        description="OpenSearch's query words are told apart by Snowball's stems, not the "
        "index's Porter stems: a word is dropped or weighed twice (fresh probe of stop 50)",
    ),
    Mutant(
        id="query-words-unbounded",
        path="layers/memvault/search/text.py",
        original="    return list(out.values())[:MAX_QUERY_WORDS]\n",
        replacement="    return list(out.values())\n",
        kill=(
            "tests/integration/test_opensearch_query_words.py"
            "::test_a_query_of_thousands_of_words_is_searched[2000 CJK characters]",
        ),
        description="a query of more words than the node takes in one query gets a "
        "retryable 503 every time (fresh probe of stop 50)",
    ),
    Mutant(
        id="hidden-named-fact-takes-a-revalidation-place",
        path="layers/memvault/services/recall.py",
        original=(
            '        named = [c for c in ordered if c.sources == ["canonical_key"]]\n'
            '        ordered = [c for c in ordered if c.sources != ["canonical_key"]]\n'
        ),
        replacement="        named: list[_Candidate] = []\n",
        kill=(
            "tests/integration/test_keyword_statistics.py"
            "::test_naming_a_hidden_facts_key_changes_nothing[embedded-sqlite-above the ceiling]",
        ),
        description="a fact the reader may not read, named by key, takes a place in "
        "re-validation's first batch and changes the answer (fresh probe of stop 49)",
    ),
    Mutant(
        id="hidden-named-fact-counted-when-expired-or-candidate",
        path="layers/memvault/services/recall.py",
        original=(
            "        if m.sensitivity.rank > ctx.max_sensitivity.rank:\n"
            '            return "ceiling"\n'
        ),
        replacement=(
            "        if m.status is MemoryStatus.CANDIDATE:\n"
            '            return "candidate_status"\n'
            "        if m.sensitivity.rank > ctx.max_sensitivity.rank:\n"
            '            return "ceiling"\n'
        ),
        kill=(
            "tests/integration/test_keyword_statistics.py"
            "::test_naming_a_hidden_facts_key_changes_nothing[embedded-sqlite-a hidden candidate]",
        ),
        description="a hidden candidate fact named by key is counted in the trace, its "
        "status judged before the reader's access",
    ),
    Mutant(
        id="ties-rank-in-index-order",
        path="layers/memvault/services/recall.py",
        original="            sorted(hits, key=lambda h: (-h.score, h.chain_id))\n",
        replacement="            list(hits)\n",
        kill=(
            "tests/integration/test_keyword_statistics.py"
            "::test_equal_scores_rank_by_chain_id_not_by_where_the_index_put_them[embedded-sqlite]",
        ),
        description="equal scores rank in the index's slot order, which a hidden delete moves",
    ),
    Mutant(
        id="relevance-floor-switch-ignored",
        path="layers/memvault/services/recall.py",
        original="        if not req.relevance_floor:\n            return valid\n",
        replacement="",
        kill=(
            "tests/integration/test_relevance_floor_switch.py"
            "::test_without_the_floor_a_weak_match_comes_back_and_the_trace_says_so"
            "[embedded-sqlite]",
        ),
        description="a recall asked without the relevance floor still answers a weak "
        "match with nothing",
    ),
    Mutant(
        id="recall-trace-hides-superseded-drops",
        path="layers/memvault/services/recall.py",
        original="            drops.append("
        'DroppedCandidate(c.chain_id, c.memory_id, "superseded"))\n',
        replacement="            pass\n",
        kill=(
            "tests/integration/test_traces.py"
            "::test_a_deleted_and_a_superseded_document_in_the_index_are_counted_as_dropped[sqlite]",
        ),
        description="a recall trace does not say that re-validation dropped a superseded document",
    ),
    Mutant(
        id="langgraph-writes-land-off-the-thread-line",
        path="clients/python/memvault_client/langgraph/saver.py",
        original='        if states and states[-1]["checkpoint_id"] == checkpoint_id:\n',
        replacement="        if states:\n",
        kill=(
            "tests/langgraph_adapters/test_saver.py"
            "::test_writes_for_a_checkpoint_off_the_thread_line_are_refused",
        ),
        description="writes for a checkpoint whose put lost a race land on the thread",
    ),
    # A keyed chain's head is its fact's pointer: creating it must claim the fact.
    Mutant(
        id="keyed-head-claims-nothing",
        path="layers/memvault/storage/dynamodb/memory.py",
        original=(
            '                        "ttl": ttl,\n'
            "                    }\n"
            "                ),\n"
            '                "ConditionExpression": "attribute_not_exists(pk)",\n'
        ),
        replacement=(
            '                        "ttl": ttl,\n                    }\n                ),\n'
        ),
        kill=(
            f"{MEMORY_PORT}::test_a_second_chain_cannot_take_a_held_pointer[dynamodb]",
            "tests/storage/test_dynamo_chain_slots.py"
            "::test_generations_follow_each_other_and_two_claims_of_one_win_once",
        ),
        description="a new chain head is put without attribute_not_exists: a second chain "
        "overwrites the fact's live chain",
    ),
    Mutant(
        id="chain-slot-not-checked",
        path="layers/memvault/storage/dynamodb/memory.py",
        original=(
            "        return chain_from_item(item) "
            'if item and item["chain_id"] == chain_id else None\n'
        ),
        replacement="        return chain_from_item(item) if item else None\n",
        kill=(
            "tests/storage/test_dynamo_chain_slots.py"
            "::test_a_chain_whose_slot_another_generation_took_is_not_found_nor_extended",
        ),
        description="a chain read by id answers with whatever chain now holds its fact and "
        "generation's slot",
    ),
    Mutant(
        id="sqlite-session-append-ignores-the-epoch",
        path="layers/memvault/storage/sqlite/sessions.py",
        original="            if epoch_moved(conn, new.tenant_id, new.subject_id, "
        "new.subject_epoch):\n",
        replacement="            if False:\n",
        kill=(
            f"{SESSIONS_PORT}::test_an_append_commits_only_under_the_epoch_it_was_decided_under"
            "[sqlite]",
            "tests/integration/test_forget_race.py"
            "::test_a_new_session_racing_a_forget_is_either_refused_or_kept_whole[sqlite]",
        ),
        description="a session begun before a forget, written after its purge, survives it",
    ),
    Mutant(
        id="run-content-above-the-ceiling-shown",
        path="layers/memvault/services/runs.py",
        original="    hidden = _unreadable(ctx, cp)\n",
        replacement="    hidden: list[str] = []\n",
        kill=(
            "tests/integration/test_run_personal_data.py"
            "::test_a_reader_sees_only_the_run_state_its_ceiling_admits[sqlite]",
        ),
        description="a public-ceiling token reads a run's personal state back whole",
    ),
    Mutant(
        id="run-personal-data-without-consent",
        path="layers/memvault/services/runs.py",
        original="    if found and not consent:\n",
        replacement="    if False:\n",
        kill=(
            "tests/integration/test_run_personal_data.py"
            "::test_personal_data_in_run_state_needs_consent_and_nothing_is_kept_without_it"
            "[sqlite]",
        ),
        description="a checkpoint holding an SSN, an email and a phone number is kept "
        "without consent",
    ),
    Mutant(
        id="recall-trace-counts-hidden-keyed-facts",
        path="layers/memvault/services/recall.py",
        original='            and candidates[d.chain_id].sources == ["canonical_key"]\n',
        replacement="            and candidates[d.chain_id].sources == []\n",
        kill=(
            "tests/integration/test_traces.py"
            "::test_a_readers_own_recall_trace_tells_nothing_of_a_fact_it_may_not_read[sqlite]",
        ),
        description="a reader's recall trace counts a hidden fact found by the key it "
        "recalled (exact_key 1, dropped_withheld 1): an oracle for hidden keys",
    ),
    Mutant(
        id="route-middleware-built-twice",
        path="local/memvault_local/threads.py",
        original="            if not self._middleware_stack_built:\n",
        replacement="            if True:\n",
        kill=(
            "tests/integration/test_local_store.py"
            "::test_a_route_first_requested_on_threads_at_once_builds_its_middleware_once"
            "[sqlite]",
        ),
        description="threads making a route's first requests at once nest its middleware "
        "stack, and every later request to it answers 500",
    ),
    Mutant(
        id="replay-ignores-what-a-raise-withheld",
        path="layers/memvault/services/memory.py",
        original="            or _withheld_through(ctx, versions) >= memory.version\n",
        replacement="            or False\n",
        kill=(
            f"{RECLASSIFIED}::test_a_retried_write_of_a_version_a_raise_withheld_answers_not_found"
            "[sqlite-raised to pii, then public with new content]",
        ),
        description="a retry of the request that wrote a version a raise withheld answers "
        "201 with it (and 409 for a guess): a content oracle",
    ),
    Mutant(
        id="write-only-token-replays-anothers-write",
        path="layers/memvault/services/memory.py",
        original=(
            "            or (Scope.MEMORY_READ not in ctx.scopes"
            " and memory.created_by != ctx.principal)\n"
        ),
        replacement="            or False\n",
        kill=(
            f"{RECLASSIFIED}::test_a_write_only_token_cannot_replay_another_callers_write[sqlite]",
        ),
        description="a memory:write-only token learns another caller's memory by replaying "
        "its request id",
    ),
)

ALL: tuple[Mutant, ...] = (*MUTANTS, *SQLITE_MUTANTS)
