"""The type stubs (qforge/__init__.pyi) parse and cover what the package exports."""

import ast
import pathlib

import qforge

STUBS = pathlib.Path(qforge.__file__).with_name("__init__.pyi")


def stub_tree():
    return ast.parse(STUBS.read_text(), filename=str(STUBS))


def test_every_export_has_a_stub():
    names = {
        node.name if hasattr(node, "name") else node.targets[0].id
        for node in stub_tree().body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        or (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name))
    }
    missing = set(qforge.__all__) - names
    assert not missing, f"exported without a stub: {sorted(missing)}"


def test_every_prepared_model_member_has_a_stub():
    (cls,) = [n for n in stub_tree().body if isinstance(n, ast.ClassDef) and n.name == "PreparedModel"]
    stubbed = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    public = {name for name in dir(qforge.PreparedModel) if not name.startswith("_")}
    assert public - stubbed == set()
