/*
 * The fast path's protocol (ipc/include/hurray/ipc/fast_path_layout.h), checked in every
 * interleaving: no consumer reads a version's memory after the daemon freed it while the
 * consumer's confirmed slot named it.
 *
 * What is modelled, step for step with the header:
 *   - one directory entry E (one name) and the header's `state` (kServing, kEnded);
 *   - NC consumers with NS lease slots each. A consumer pins any version id 1..NV in a free
 *     slot (Pin: store the slot; load E's version_id, then the header's state; clear the slot
 *     when they do not confirm it), reads the version's memory any number of times while
 *     pinned, and unpins (Unpin: clear the slot). The id it pins is any id at all: a stale
 *     descriptor cache, a version never published, garbage -- a superset of what a client
 *     could try;
 *   - the daemon publishes versions 2..NV (version 1 is live at the start) into a pool of
 *     NB buffers: the version's bytes are written into a free buffer, then the journal and
 *     E name it (WriteEntry), in either order; the version it supersedes is retired. Then
 *     it deletes the name (E := 0), retiring the last version. Retiring V: scan every slot
 *     of every consumer for V (Names: one load per slot, each its own step), free V when no
 *     slot names it, otherwise keep V pinned and scan again later (the rescan, interleaved
 *     with everything else). Freeing a buffer overwrites it (memory reuse): its bytes no
 *     longer show the version;
 *   - a crash (or stop) of the daemon at any step: the next daemon marks the directory
 *     kEnded before it frees anything, adopts the journal's live version and frees every
 *     other version without looking at the old lease pages (they went with the old
 *     sessions).
 *
 * The properties, asserted in the consumer's read step:
 *   - the version it reads is published and not freed, and its buffer holds its own bytes;
 *   - except for the known limit of docs/reliability.md: a view whose confirm completed
 *     while the directory was still served may see its version freed by the *next* daemon
 *     (only live versions are journaled). A confirm that completes after the end is not
 *     excused: "no confirm succeeds on a directory whose daemon is gone".
 *
 * Memory model: interleaving (sequentially consistent) semantics is exact for this
 * protocol, because every access on which the argument rests is seq_cst in the header --
 * Pin's slot store and its loads of E.version_id and `state`, WriteEntry's store of
 * E.version_id, Names's slot loads, and the next daemon's store of kEnded (the daemon's
 * side must make it seq_cst, before its first free) -- and seq_cst accesses take one
 * total order consistent with program order. The other accesses are the release stores
 * that clear a slot (Unpin and a failed Pin): a scan that reads the 0 acquires it, so the
 * consumer's reads before the clear happen before the free, as the model's order has
 * them. WriteEntry's sequence counter and version_number (relaxed, for ReadEntry's
 * snapshot) take no part in the confirm and are not modelled.
 *
 * Variants (spin -a -DNAME fast_path.pml), each expected to FAIL:
 *   BROKEN           Pin without the confirm: the slot is stored and the version read.
 *   BROKEN_NO_STATE  the confirm without the header's state: a consumer confirms against
 *                    the entry of a directory whose daemon is gone.
 *   STATE_FIRST      the confirm loads the state before the entry: the daemon crashes
 *                    between the two loads, after journaling a new version but before
 *                    rewriting E; the next daemon ends the directory and frees the old
 *                    version, and the consumer's entry load still confirms it.
 * Other defines: NO_RESTART (no crash), NS=1 (one slot per consumer).
 * tests/model/run_model.sh checks the correct model (2 consumers x 2 slots without the
 * crash, 2 x 1 with it; --full: 2 x 2 with it); README.md shows how to run the others.
 */

#define NC 2   /* consumers */
#ifndef NS
#define NS 2   /* lease slots per consumer: 1 or 2 */
#endif
#define NV 3   /* versions: 1 is live at the start, 2..NV are published later */
#define NB 2   /* pool buffers */

#define SERVING 1
#define ENDED 2

#define NO_BUFFER 255
#define SCRIBBLE 0   /* what a freed buffer holds once reused */

#define NOT_FREED 0
#define FREED_BY_DAEMON 1     /* by the daemon that serves the directory */
#define FREED_BY_SUCCESSOR 2  /* by the next daemon, after the directory ended */

/* Shared memory: the directory and the lease pages. */
byte state = SERVING;
byte entry = 1;               /* E.version_id */
byte slot[NC * NS];           /* slot[c * NS + i]: consumer c's slot i */

/* The pool, as the consumers' assertions see it. */
byte buf_of[NV + 1];          /* the buffer a version's bytes are in */
byte mem[NB];                 /* what each buffer holds: the id of the version written */
bool published[NV + 1];
byte freed[NV + 1];           /* NOT_FREED, FREED_BY_DAEMON, FREED_BY_SUCCESSOR */

bool crashed = false;

/* Retiring version `v`: scan every slot once; free `v` or keep it for a rescan. */
inline retire(v) {
  do
  :: k < NC * NS ->
       d_step { named = named || (slot[k] == v); k++ }   /* Names: one load a step */
  :: else ->
       d_step {
         if
         :: named -> pinned_by_daemon[v] = true
         :: else ->
              pinned_by_daemon[v] = false;
              freed[v] = FREED_BY_DAEMON;
              mem[buf_of[v]] = SCRIBBLE;
              buf_free[buf_of[v]] = true
         fi;
         named = false;
         k = 0;
         old = 0
       };
       break
  od
}

/* The next daemon: ends the directory, then frees every version the journal does not
   hold live, without scanning (the old sessions' pages are gone). */
inline successor() {
  state = ENDED;
  k = 1;
  do
  :: k <= NV ->
       d_step {
         if
         :: published[k] && freed[k] == NOT_FREED && k != journal_latest ->
              freed[k] = FREED_BY_SUCCESSOR;
              mem[buf_of[k]] = SCRIBBLE;
              buf_free[buf_of[k]] = true
         :: else -> skip
         fi;
         k++
       }
  :: else -> break
  od
}

proctype Daemon() {
  byte journal_latest = 1;        /* the version the journal holds live (0: none) */
  bool buf_free[NB];
  bool pinned_by_daemon[NV + 1];  /* retired, kept because a slot named it */
  byte next = 2;  /* the next version to publish */
  byte old;       /* the version being retired */
  byte k;
  bool named;

  d_step {
    k = 1;
    do
    :: k < NB -> buf_free[k] = true; k++
    :: else -> break
    od;
    k = 0
  };
  do
  :: next <= NV && (buf_free[0] || buf_free[1]) ->
       /* The producer's bytes go into a free buffer. */
       d_step {
         if
         :: buf_free[0] -> buf_of[next] = 0
         :: else -> buf_of[next] = 1
         fi;
         buf_free[buf_of[next]] = false;
         mem[buf_of[next]] = next;
         published[next] = true
       }
       old = journal_latest;
       if
       :: journal_latest = next; entry = next   /* WriteEntry */
       :: entry = next; journal_latest = next
       fi;
       next++;
       retire(old)
  :: next > NV && journal_latest != 0 ->
       /* Delete the name. */
       old = journal_latest;
       if
       :: journal_latest = 0; entry = 0
       :: entry = 0; journal_latest = 0
       fi;
       retire(old)
  :: pinned_by_daemon[1] -> old = 1; retire(old)   /* the rescans */
  :: pinned_by_daemon[2] -> old = 2; retire(old)
  :: pinned_by_daemon[3] -> old = 3; retire(old)
  :: next > NV && journal_latest == 0 &&
     !pinned_by_daemon[1] && !pinned_by_daemon[2] && !pinned_by_daemon[3] ->
       break
  od unless { crashed -> successor() }
}

/* The daemon may crash (or stop) at any step, or never. */
proctype Crash() {
  if
  :: crashed = true
  :: skip
  fi
}

/* A consumer's read of the memory of the version its confirmed slot `j` names. */
inline read(j) {
  d_step {
    if
    :: freed[slot[c * NS + j]] == FREED_BY_SUCCESSOR && before_end[j] ->
         skip   /* the known limit */
    :: else ->
         assert(freed[slot[c * NS + j]] == NOT_FREED);
         assert(published[slot[c * NS + j]]);
         assert(mem[buf_of[slot[c * NS + j]]] == slot[c * NS + j])
    fi
  }
}

/* Unpin slot `j`. */
inline unpin(j) {
  d_step {
    slot[c * NS + j] = 0;
    pinned[j] = false;
    before_end[j] = false
  }
}

/* Consumer c: its slots are slot[c * NS + 0 .. NS - 1] (the version each names, or 0). */
proctype Consumer(byte c) {
  bool pinned[NS];        /* slot i confirmed */
  bool before_end[NS];    /* its confirm completed while the directory was served */
  byte i;                 /* the slot being pinned */
  bool confirmed;         /* what the confirm saw so far */

  do
  :: atomic {
       /* Pin: take a free slot, name any version (slot := V). */
       if
       :: !pinned[0] -> i = 0
#if NS > 1
       :: !pinned[1] -> i = 1
#endif
       fi;
#ifdef BROKEN
       /* Only ids it acquired before over the slow path, so that what fails is the free. */
       if
       :: published[1] -> slot[c * NS + i] = 1
       :: published[2] -> slot[c * NS + i] = 2
       :: published[3] -> slot[c * NS + i] = 3
       fi
#else
       if
       :: slot[c * NS + i] = 1
       :: slot[c * NS + i] = 2
       :: slot[c * NS + i] = 3
       fi
#endif
     }
#ifdef BROKEN
     /* No confirm: trust the id. */
     d_step {
       pinned[i] = true;
       before_end[i] = (state == SERVING);
       i = 0
     }
#else
     /* The confirm, in Pin's order: the entry, then the header's state. */
#if defined(STATE_FIRST)
     confirmed = (state == SERVING);
     d_step {
       confirmed = confirmed && (entry == slot[c * NS + i]);
       before_end[i] = (state == SERVING)
     }
#elif defined(BROKEN_NO_STATE)
     d_step {
       confirmed = (entry == slot[c * NS + i]);
       before_end[i] = (state == SERVING)
     }
#else
     confirmed = (entry == slot[c * NS + i]);
     d_step {
       confirmed = confirmed && (state == SERVING);
       before_end[i] = (state == SERVING)
     }
#endif
     d_step {
       if
       :: confirmed -> pinned[i] = true
       :: else -> slot[c * NS + i] = 0   /* slow path */
       fi;
       confirmed = false;
       i = 0
     }
#endif
  :: pinned[0] -> read(0)
#if NS > 1
  :: pinned[1] -> read(1)
#endif
  :: pinned[0] -> unpin(0)
#if NS > 1
  :: pinned[1] -> unpin(1)
#endif
  od
}

/* Version 1 is live at the start, in buffer 0. */
init {
  byte k;
  atomic {
    k = 0;
    do
    :: k <= NV -> buf_of[k] = NO_BUFFER; k++
    :: else -> break
    od;
    buf_of[1] = 0;
    mem[0] = 1;
    published[1] = true;
    run Daemon();
#ifndef NO_RESTART
    run Crash();
#endif
    run Consumer(0);
    run Consumer(1)
  }
}
