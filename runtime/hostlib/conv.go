package hostlib

import (
	"encoding/json"
	"fmt"
	"unsafe"

	"tofuc/runtime/plan"
)

// Conv runs convolution c on the tensors at x, w and y, and its
// post-ops' bias at bias where c has one (their buffers' first
// elements). The call must have been validated (plan.Validate). Its
// primitive is made for the call and freed after it unless a caller
// holds it (AcquireConv).
//
// weightsBinding, when not 0, says that the weights at w are a
// parameter binding's, which stays unchanged until the caller binds
// others under another number: a call with the binding of the last call
// with weights at w does not reorder them to the primitive's layout
// again (the primitive keeps them per address). A reorder of ResNet-50's weights at every call took a
// fifth of its convolutions' time (docs/placement.md).
func (l *Library) Conv(c *plan.ConvCall, x, w, y, bias unsafe.Pointer, weightsBinding uint64) error {
	if l.dnnl == nil {
		return fmt.Errorf("backend %s has no convolutions", l.Name)
	}
	p, release, err := l.dnnl.acquire(convKey(c), func() (*prim, error) { return l.dnnl.newConv(c) })
	if err != nil {
		return err
	}
	defer release()
	ptrs := []unsafe.Pointer{unsafe.Add(x, 4*c.X.Offset), unsafe.Add(w, 4*c.W.Offset), unsafe.Add(y, 4*c.Y.Offset), nil}
	if c.Post != nil && c.Post.Bias != nil {
		ptrs[3] = unsafe.Add(bias, 4*c.Post.Bias.Offset)
	}
	return l.dnnl.run(p, ptrs, weightsBinding)
}

// AcquireConv makes convolution c's primitive (oneDNN compiles its
// kernel then), or takes the one made for another caller, and holds it
// until release: a program holds its convolutions from its load, so
// that a convolution the library cannot make is said then, and its
// calls do not make them again.
func (l *Library) AcquireConv(c *plan.ConvCall) (release func(), err error) {
	if l.dnnl == nil {
		return nil, fmt.Errorf("backend %s has no convolutions", l.Name)
	}
	_, release, err = l.dnnl.acquire(convKey(c), func() (*prim, error) { return l.dnnl.newConv(c) })
	return release, err
}

// convKey keys a convolution's primitive: its call without its library
// and its operands' places.
func convKey(c *plan.ConvCall) string {
	shape := *c
	shape.Backend, shape.X, shape.W, shape.Y = "", plan.Dense{}, plan.Dense{}, plan.Dense{}
	if c.Post != nil {
		post := *c.Post
		if post.Bias != nil {
			post.Bias = &plan.Dense{}
		}
		shape.Post = &post
	}
	b, _ := json.Marshal(shape)
	return string(b)
}

// newConv makes c's primitive. It reads and writes the layouts oneDNN
// chooses (blocked ones), reordered to and from the plan's at each call:
// its depthwise kernels are 6–14× faster than on the plain layout, and
// ResNet-50's convolutions 1.6× (docs/placement.md).
func (a *dnnlAPI) newConv(c *plan.ConvCall) (*prim, error) {
	xs, ws, ys := c.Shapes()
	if c.Group > 1 {
		ws = append([]int64{c.Group, c.O / c.Group}, ws[1:]...)
	}
	var plain [3]memDesc
	for i, shape := range [][]int64{xs, ws, ys} {
		if err := dnnlStatus("dnnl_memory_desc_init_by_tag", a.mdInitByTag(&plain[i], int32(len(shape)), dimsOf(shape), dnnlF32, dnnlPlainTag[len(shape)])); err != nil {
			return nil, err
		}
	}
	var asked [3]memDesc
	for i, shape := range [][]int64{xs, ws, ys} {
		if err := dnnlStatus("dnnl_memory_desc_init_by_tag", a.mdInitByTag(&asked[i], int32(len(shape)), dimsOf(shape), dnnlF32, dnnlFormatAny)); err != nil {
			return nil, err
		}
	}
	dilations := make([]int64, len(c.Dilations))
	for i, d := range c.Dilations {
		dilations[i] = d - 1 // oneDNN counts the gaps
	}
	var cd opDesc
	var bias *memDesc // the post-ops' bias, plain; nil where none
	if c.Post != nil && c.Post.Bias != nil {
		bias = new(memDesc)
		if err := dnnlStatus("dnnl_memory_desc_init_by_tag", a.mdInitByTag(bias, 1, dimsOf([]int64{c.O}), dnnlF32, dnnlPlainTag[1])); err != nil {
			return nil, err
		}
	}
	st := a.convInit(&cd, dnnlForwardInference, dnnlConvDirect, &asked[0], &asked[1], bias, &asked[2],
		dimsOf(c.Strides), dimsOf(dilations), dimsOf(c.PadsBegin), dimsOf(c.PadsEnd))
	if err := dnnlStatus("dnnl_dilated_convolution_forward_desc_init", st); err != nil {
		return nil, err
	}
	var acts []plan.Activation
	if c.Post != nil {
		acts = c.Post.Acts
	}
	attr, done, err := a.attrWith(acts)
	if err != nil {
		return nil, err
	}
	defer done()
	var pd uintptr
	if err := dnnlStatus("dnnl_primitive_desc_create", a.pdCreate(&pd, &cd, attr, a.engine, 0)); err != nil {
		return nil, err
	}
	defer a.pdDestroy(pd)
	p := &prim{}
	err = a.fill(p, pd, &plain)
	if err == nil && bias != nil {
		err = dnnlStatus("dnnl_memory_create", a.memCreate(&p.bias, bias, a.engine, 0))
	}
	if err != nil {
		a.destroy(p)
		return nil, err
	}
	return p, nil
}
