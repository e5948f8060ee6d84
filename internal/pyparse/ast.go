package pyparse

// Node is a node of Python's abstract syntax tree, with the fields of
// CPython's ast module that ast.unparse reads. T is the node's class name
// (Module, FunctionDef, BinOp, ...); what the other fields hold depends on
// it, as noted per field.
type Node struct {
	T string
	// Op: the operator (BinOp, UnaryOp, BoolOp, AugAssign: "+", "not",
	// "and"...); the identifier (Name, Attribute's attr, FunctionDef,
	// ClassDef, arg, keyword's arg, alias' name, ImportFrom's module,
	// ExceptHandler's name, MatchAs/MatchStar name, MatchMapping rest).
	Op string
	// As: alias' asname.
	As string
	// Const: a Constant's value.
	Const *Const
	// A, B, C: the single children, in the order of the ast fields
	// (e.g. BinOp left, right; IfExp test, body, orelse; Subscript value,
	// slice; Slice lower, upper, step; FunctionDef args, returns).
	A, B, C *Node
	// L, L2, L3: the lists of children (e.g. Call args, keywords; Dict
	// keys, values; Compare comparators; Assign targets; decorator_list
	// in L3; comprehension generators in L2).
	L, L2, L3 []*Node
	// Body, Else, Final: statement lists; Handlers of Try.
	Body, Else, Final, Handlers []*Node
	// Names: Global/Nonlocal names, Compare ops, MatchClass kwd_attrs.
	Names []string
	// N: ImportFrom level, FormattedValue conversion (-1 none), AnnAssign
	// simple, comprehension is_async, arguments' number of posonlyargs.
	N int
	// arguments: Else holds kw_defaults (nil where a keyword-only
	// parameter has none), L3 kwonlyargs, A vararg, B kwarg.
	par bool // written in parentheses (for the parser's checks)
}

// Const is a Constant's value.
type Const struct {
	// Kind: "str", "bytes", "int", "float", "complex", "None", "True",
	// "False", "Ellipsis".
	Kind string
	S    string // str (UTF-8) and bytes (raw bytes) values
	Num  string // int, float and complex literals as written
	U    bool   // the str literal had a u prefix (Constant.kind == "u")
}

func nd(t string) *Node { return &Node{T: t} }
