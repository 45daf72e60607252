"""FUNCTION LOAD/LIST/DELETE/FLUSH/STATS and FCALL/FCALL_RO against redis-server 7.0,
byte for byte. Intended differences: libraries live in the manifold's memory; FUNCTION
DUMP/RESTORE are not served (not compared)."""

import pytest

from redisdiff import cmd, differential

LIB = "#!lua name=fnlib\nredis.register_function('fn_set', function(k, a) return redis.call('SET', k[1], a[1]) end)\nredis.register_function{function_name='fn_get', callback=function(k, a) return redis.call('GET', k[1]) end, flags={'no-writes'}}"


@pytest.mark.parametrize("pipeline", [True, False])
def test_functions(redis_door, redis_reference, pipeline):
    differential(redis_door, redis_reference, [
        cmd("FUNCTION", "FLUSH"),
        cmd("FCALL", "fn_set", "1", "fn:k", "v"),
        cmd("FUNCTION", "LOAD", LIB),
        cmd("FUNCTION", "LOAD", LIB),
        cmd("FUNCTION", "LOAD", "REPLACE", LIB),
        cmd("FCALL", "fn_set", "1", "fn:k", "v"),
        cmd("FCALL", "fn_get", "1", "fn:k"),
        cmd("FCALL_RO", "fn_get", "1", "fn:k"),
        cmd("FCALL_RO", "fn_set", "1", "fn:k", "w"),
        cmd("FCALL", "fn_get", "x"),
        cmd("FCALL", "fn_get", "-1"),
        cmd("FCALL", "fn_get", "3", "a"),
        cmd("FUNCTION", "LIST"),
        cmd("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "fn*"),
        cmd("FUNCTION", "LIST", "bad"),
        cmd("FUNCTION", "STATS"),
        cmd("FUNCTION", "LOAD", "return 1"),
        cmd("FUNCTION", "LOAD", "#!lua name=x\nreturn 1"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnlib2\nx"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnlib2\nredis.register_function('fn_set', function() end)"),
        cmd("FUNCTION", "HELP"),
        cmd("FUNCTION", "KILL"),
        cmd("FUNCTION", "DELETE", "nolib"),
        cmd("FUNCTION", "DELETE", "fnlib"),
        cmd("FCALL", "fn_get", "1", "fn:k"),
        cmd("FUNCTION", "FLUSH", "bad"),
        cmd("FUNCTION", "FLUSH", "SYNC"),
        cmd("DEL", "fn:k"),
    ], pipeline=pipeline)
