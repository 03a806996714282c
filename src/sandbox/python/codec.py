# Plain Python values as JSON, the only thing that crosses between the grader and the code's process: None, bool,
# int, str and list are JSON's own; float (as float.hex, so exact, nan and -0.0 included), complex, bytes, tuple,
# dict, set and frozenset are one-key tagged objects. encode takes only the exact builtin types (a subclass could
# carry its own __eq__); decode builds only them and refuses anything else, floats outside their tag included.
# Shared by grader.py and candidate.py: programs.ts puts it ahead of each.
import json

MAX_DEPTH = 100

class NotPlain(TypeError):
    pass

# Exact types, never subclasses: a subclass could carry its own __eq__.
JSON_SCALARS = (bool, int, str)

def guard_depth(depth, error):
    if depth > MAX_DEPTH:
        raise error("the value is nested more than %d deep" % MAX_DEPTH)

def encode(value, depth=0):
    guard_depth(depth, NotPlain)
    kind = type(value)
    if value is None or kind in JSON_SCALARS:
        return value
    if kind is float:
        return {"float": value.hex()}
    if kind is list:
        return [encode(item, depth + 1) for item in value]
    if kind is tuple or kind is set or kind is frozenset:
        return {kind.__name__: [encode(item, depth + 1) for item in value]}
    if kind is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is complex:
        return {"complex": [value.real.hex(), value.imag.hex()]}
    if kind is bytes:
        return {"bytes": value.hex()}
    raise NotPlain("a %s is not a plain value (None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)" % kind.__name__)

def decode(data, depth=0):
    guard_depth(depth, ValueError)
    kind = type(data)
    if data is None or kind in JSON_SCALARS:
        return data
    if kind is list:
        return [decode(item, depth + 1) for item in data]
    if kind is dict and len(data) == 1:
        (tag, payload), = data.items()
        if tag == "float" and type(payload) is str:
            return float.fromhex(payload)
        if tag == "bytes" and type(payload) is str:
            return bytes.fromhex(payload)
        if tag == "complex" and type(payload) is list and len(payload) == 2 and all(type(part) is str for part in payload):
            return complex(float.fromhex(payload[0]), float.fromhex(payload[1]))
        if type(payload) is list:
            items = [decode(item, depth + 1) for item in payload]
            if tag == "tuple":
                return tuple(items)
            if tag == "set":
                return set(items)
            if tag == "frozenset":
                return frozenset(items)
            if tag == "dict" and all(type(pair) is list and len(pair) == 2 for pair in items):
                return dict(items)
    raise ValueError("not an encoded plain value: %.80r" % (data,))

def reject_json_float(text):
    raise ValueError("a bare JSON number %s (floats travel as {\"float\": hex})" % text)

def load_plain_json(line):
    return json.loads(line, parse_float=reject_json_float, parse_constant=reject_json_float)
