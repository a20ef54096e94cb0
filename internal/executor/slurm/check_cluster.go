package slurm

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/internal/suggest"
)

// sinfoFormat is the one sinfo format Check asks for, one line per node
// and partition (--Node): partition, partition with "*" when it is the
// default, its availability, its time limit, the node, its CPUs, memory
// (MB), generic resources, state and features, separated by "|".
const sinfoFormat = "%R|%P|%a|%l|%N|%c|%m|%G|%t|%f"

// PartitionInfo is what sinfo says of one partition.
type PartitionInfo struct {
	Name      string     `json:"name"`
	Default   bool       `json:"default"`
	Avail     string     `json:"avail"`      // up, down, drain or inact
	TimeLimit string     `json:"time_limit"` // as sinfo writes it: infinite, 1-00:00:00, 30:00
	Nodes     []NodeInfo `json:"nodes"`
}

// NodeInfo is what sinfo says of one node of a partition.
type NodeInfo struct {
	Name     string   `json:"name"`
	CPUs     int      `json:"cpus"`
	MemoryMB int64    `json:"memory_mb"`
	Gres     []Gres   `json:"gres,omitempty"`
	State    string   `json:"state"` // sinfo's short form: idle, mix, alloc, down*, drain...
	Features []string `json:"features,omitempty"`
}

// Gres is one generic resource of a node: gpu, or gpu of a type.
type Gres struct {
	Name  string `json:"name"`
	Type  string `json:"type,omitempty"`
	Count int    `json:"count"`
}

func (g Gres) String() string {
	if g.Type == "" {
		return fmt.Sprintf("%s:%d", g.Name, g.Count)
	}
	return fmt.Sprintf("%s:%s:%d", g.Name, g.Type, g.Count)
}

// parseSinfo reads sinfo --Node output in sinfoFormat into partitions, in
// the order sinfo lists them.
func parseSinfo(out []byte) ([]PartitionInfo, error) {
	var parts []PartitionInfo
	at := map[string]int{}
	err := eachRow(out, func(line string, f []string) error {
		if len(f) != 10 {
			return fmt.Errorf("read sinfo output: %q has %d fields, want 10", truncate(line, 120), len(f))
		}
		name := f[0]
		if name == "" {
			return fmt.Errorf("read sinfo output: %q names no partition", truncate(line, 120))
		}
		i, ok := at[name]
		if !ok {
			i = len(parts)
			at[name] = i
			parts = append(parts, PartitionInfo{Name: name, Default: strings.HasSuffix(f[1], "*"), Avail: f[2], TimeLimit: f[3]})
		}
		n := NodeInfo{Name: f[4], CPUs: int(leadingInt(f[5])), MemoryMB: leadingInt(f[6]), Gres: parseGres(f[7]), State: f[8]}
		if f[9] != "" && f[9] != "(null)" {
			n.Features = strings.Split(f[9], ",")
		}
		parts[i].Nodes = append(parts[i].Nodes, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return parts, nil
}

// leadingInt reads the number at the start of s ("2", "21694+"); 0 when
// there is none.
func leadingInt(s string) int64 {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, _ := strconv.ParseInt(s[:end], 10, 64)
	return n
}

// parseGres reads a node's generic resources as sinfo writes them:
// "(null)", "gpu:2", "gpu:a100:4(S:0-1),mps:400". Entries whose count is
// not a number are left out.
func parseGres(s string) []Gres {
	var out []Gres
	depth, start := 0, 0
	var items []string
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	items = append(items, s[start:])
	for _, it := range items {
		if i := strings.IndexByte(it, '('); i >= 0 {
			it = it[:i]
		}
		f := strings.Split(strings.TrimSpace(it), ":")
		if len(f) < 2 || f[0] == "" {
			continue
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil || n < 0 {
			continue
		}
		g := Gres{Name: f[0], Count: n}
		if len(f) >= 3 {
			g.Type = strings.Join(f[1:len(f)-1], ":")
		}
		out = append(out, g)
	}
	return out
}

// parseTimeLimit reads a Slurm time limit ("infinite", "30", "30:00",
// "2:00:00", "1-00:00:00", "1-12"): ok is false for one without a limit
// or that cannot be read.
func parseTimeLimit(s string) (d time.Duration, ok bool) {
	days := 0
	if a, b, found := strings.Cut(s, "-"); found {
		n, err := strconv.Atoi(a)
		if err != nil {
			return 0, false
		}
		days, s = n, b
	}
	var nums []int
	for _, p := range strings.Split(s, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, false
		}
		nums = append(nums, n)
	}
	var h, m, sec int
	switch {
	case len(nums) == 1 && days > 0: // days-hours
		h = nums[0]
	case len(nums) == 1: // minutes
		m = nums[0]
	case len(nums) == 2 && days > 0: // days-hours:minutes
		h, m = nums[0], nums[1]
	case len(nums) == 2: // minutes:seconds
		m, sec = nums[0], nums[1]
	case len(nums) == 3:
		h, m, sec = nums[0], nums[1], nums[2]
	default:
		return 0, false
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, true
}

// usableNode reports whether a node in state (sinfo's short form) can
// start jobs: not down, drained, failed or not responding ("*").
func usableNode(state string) bool {
	if strings.Contains(state, "*") {
		return false
	}
	switch strings.TrimRight(state, "~#%!@^-$") {
	case "idle", "mix", "mixed", "alloc", "allocated", "comp", "completing", "resv", "reserved", "plnd", "planned":
		return true
	}
	return false
}

// partitions asks sinfo about the partitions and judges each the tasks
// use (judgePartitions); it returns those a probe may be sent to, by the
// name the tasks give ("" the default); nil when sinfo did not answer.
func (c *checker) partitions(ctx context.Context) map[string]bool {
	out, err := c.cmds.Run(ctx, "sinfo", "--Node", "--noheader", "--format="+sinfoFormat)
	if err != nil {
		c.add(StepPartition, LevelProblem, "sinfo: "+errText(err), "see that sinfo works here (run it)")
		return nil
	}
	parts, err := parseSinfo(out)
	if err != nil {
		c.add(StepPartition, LevelProblem, err.Error(), "")
		return nil
	}
	fs, used, usable := judgePartitions(parts, c.cfg.Tasks)
	c.rep.Findings = append(c.rep.Findings, fs...)
	c.rep.Partitions = used
	return usable
}

// partitionGroup is the tasks that name one partition ("" the default).
type partitionGroup struct {
	name  string
	tasks []CheckTask
}

func groupByPartition(tasks []CheckTask) []partitionGroup {
	if len(tasks) == 0 {
		return []partitionGroup{{}}
	}
	var gs []partitionGroup
	for _, t := range tasks {
		name := ""
		if t.Slurm != nil {
			name = t.Slurm.Partition
		}
		i := slices.IndexFunc(gs, func(g partitionGroup) bool { return g.name == name })
		if i < 0 {
			i = len(gs)
			gs = append(gs, partitionGroup{name: name})
		}
		gs[i].tasks = append(gs[i].tasks, t)
	}
	return gs
}

// judgePartitions is step 2 of Check, without Slurm: the findings about
// each partition the tasks name (or the default one), the partitions
// found, and which of them (by the tasks' name for it) a probe may be
// sent to.
func judgePartitions(parts []PartitionInfo, tasks []CheckTask) ([]Finding, []PartitionInfo, map[string]bool) {
	var fs []Finding
	add := func(l Level, msg, fix string) {
		fs = append(fs, Finding{Step: StepPartition, Level: l, Message: msg, Fix: fix})
	}
	names := func() []string {
		var ns []string
		for _, p := range parts {
			ns = append(ns, p.Name)
		}
		return ns
	}
	var used []PartitionInfo
	usable := map[string]bool{}
	for _, g := range groupByPartition(tasks) {
		var p *PartitionInfo
		if g.name == "" {
			if i := slices.IndexFunc(parts, func(p PartitionInfo) bool { return p.Default }); i >= 0 {
				p = &parts[i]
			}
		} else if i := slices.IndexFunc(parts, func(p PartitionInfo) bool { return p.Name == g.name }); i >= 0 {
			p = &parts[i]
		}
		switch {
		case p == nil && g.name == "":
			add(LevelProblem, "the cluster has no default partition"+taskNote(g.tasks, " and %s name%s none"),
				fmt.Sprintf("set slurm.partition in the workflow (partitions you can use: %s)", listOr(names(), "none")))
			continue
		case p == nil:
			msg := fmt.Sprintf("%q is not a partition you can use%s (sinfo lists: %s)", g.name, taskNote(g.tasks, " (%s name%s it)"), listOr(names(), "none"))
			fix := "set slurm.partition to one sinfo lists"
			if near := suggest.Closest(g.name, slices.Values(names())); near != "" {
				fix = fmt.Sprintf("did you mean %q? set slurm.partition to it", near)
			}
			add(LevelProblem, msg, fix)
			continue
		}
		if !slices.ContainsFunc(used, func(u PartitionInfo) bool { return u.Name == p.Name }) {
			used = append(used, *p)
		}
		ok := true
		var up []NodeInfo
		for _, n := range p.Nodes {
			if usableNode(n.State) {
				up = append(up, n)
			}
		}
		switch {
		case p.Avail != "up":
			ok = false
			add(LevelProblem, fmt.Sprintf("%s is %s: it starts no jobs%s", describePartition(p), strings.ToUpper(p.Avail), taskNote(g.tasks, " (%s use%s it)")),
				"ask the cluster's administrators, or set slurm.partition to a partition that is up")
		case len(up) == 0:
			ok = false
			add(LevelProblem, fmt.Sprintf("%s: none of its nodes can start jobs%s", describePartition(p), taskNote(g.tasks, " (%s use%s it)")),
				"ask the cluster's administrators, or set slurm.partition to a partition that is up")
		default:
			add(LevelOK, describePartition(p), "")
		}
		usable[g.name] = ok
		fs = append(fs, judgeNeeds(p, g.tasks)...)
	}
	return fs, used, usable
}

// describePartition says what p offers: "debug (default): up; 1 node
// (idle): 2 CPUs, 21694 MB, gres gpu:2; time limit infinite".
func describePartition(p *PartitionInfo) string {
	var b strings.Builder
	b.WriteString(p.Name)
	if p.Default {
		b.WriteString(" (default)")
	}
	fmt.Fprintf(&b, ": %s; %s", p.Avail, plural(len(p.Nodes), "node"))
	states := map[string]int{}
	for _, n := range p.Nodes {
		states[n.State]++
	}
	var ss []string
	for _, s := range slices.Sorted(maps.Keys(states)) {
		if len(p.Nodes) == 1 {
			ss = append(ss, s)
		} else {
			ss = append(ss, fmt.Sprintf("%d %s", states[s], s))
		}
	}
	fmt.Fprintf(&b, " (%s)", strings.Join(ss, ", "))
	if len(p.Nodes) > 0 {
		var cpus, mem []int64
		gres := map[string]int{}
		for _, n := range p.Nodes {
			cpus = append(cpus, int64(n.CPUs))
			mem = append(mem, n.MemoryMB)
			var gs []string
			for _, g := range n.Gres {
				gs = append(gs, g.String())
			}
			gres[listOr(gs, "none")]++
		}
		fmt.Fprintf(&b, ": %s CPUs, %s MB", span(cpus), span(mem))
		if len(gres) == 1 {
			for g := range gres {
				b.WriteString(", gres " + g)
			}
		} else {
			var gs []string
			for _, g := range slices.Sorted(maps.Keys(gres)) {
				gs = append(gs, fmt.Sprintf("%s (%s)", g, plural(gres[g], "node")))
			}
			b.WriteString(", gres " + strings.Join(gs, ", "))
		}
		if len(p.Nodes) > 1 {
			b.WriteString(" per node")
		}
	}
	fmt.Fprintf(&b, "; time limit %s", p.TimeLimit)
	return b.String()
}

// judgeNeeds finds what the tasks of p ask that no node of p offers:
// GPUs (of a type), CPUs, memory, a feature, a time limit.
func judgeNeeds(p *PartitionInfo, tasks []CheckTask) []Finding {
	var fs []Finding
	add := func(l Level, msg, fix string) {
		fs = append(fs, Finding{Step: StepPartition, Level: l, Message: msg, Fix: fix})
	}
	type gpuNeed struct {
		typ   string
		count int
	}
	var needs, later []gpuNeed
	byNeed, byLater := map[gpuNeed][]CheckTask{}, map[gpuNeed][]CheckTask{}
	var maxCPU, maxMem []CheckTask // the tasks that ask the most
	var cpuAsk int
	var memAsk int64
	byFeature := map[string][]CheckTask{}
	var features []string
	var overTime []CheckTask
	limit, limited := parseTimeLimit(p.TimeLimit)
	for _, t := range tasks {
		if t.GPUs > 0 {
			n := gpuNeed{t.GPUType, t.GPUs}
			if byNeed[n] == nil {
				needs = append(needs, n)
			}
			byNeed[n] = append(byNeed[n], t)
			for _, typ := range t.LaterGPUTypes {
				n := gpuNeed{typ, t.GPUs}
				if byLater[n] == nil {
					later = append(later, n)
				}
				byLater[n] = append(byLater[n], t)
			}
		}
		cpus, mem := hostAsk(t.Slurm, t.CPUs, t.MemoryMiBHost) // as sbatch is given them
		switch {
		case cpus > cpuAsk:
			cpuAsk, maxCPU = cpus, []CheckTask{t}
		case cpus == cpuAsk && cpuAsk > 0:
			maxCPU = append(maxCPU, t)
		}
		switch m := memMB(mem); {
		case m > memAsk:
			memAsk, maxMem = m, []CheckTask{t}
		case m == memAsk && m > 0:
			maxMem = append(maxMem, t)
		}
		if s := t.Slurm; s != nil {
			if featureWord.MatchString(s.Constraint) {
				if byFeature[s.Constraint] == nil {
					features = append(features, s.Constraint)
				}
				byFeature[s.Constraint] = append(byFeature[s.Constraint], t)
			}
		}
		if limited && t.Time > limit {
			overTime = append(overTime, t)
		}
	}
	offered := func(ok func(NodeInfo) bool) int {
		n := 0
		for _, node := range p.Nodes {
			if ok(node) {
				n++
			}
		}
		return n
	}
	for _, need := range needs {
		ts := byNeed[need]
		want := "gpu"
		if need.typ != "" {
			want += ":" + need.typ
		}
		fit := offered(func(n NodeInfo) bool { return gpusOf(n, need.typ) >= need.count })
		if fit > 0 {
			add(LevelOK, fmt.Sprintf("%s: %d of %d nodes offer %s:%d%s", p.Name, fit, len(p.Nodes),
				want, need.count, taskNote(ts, " (%s ask%s it)")), "")
			continue
		}
		fix := "set slurm.partition of the GPU tasks to a partition with GPUs (sinfo -o \"%P %G\" lists them)"
		switch types := gpuTypes(p); {
		case need.typ != "" && len(types) > 0:
			fix = fmt.Sprintf("ask for a type the partition has (%s), or a partition with %s GPUs", strings.Join(types, ", "), need.typ)
		case need.typ != "" && offered(func(n NodeInfo) bool { return gpusOf(n, "") > 0 }) > 0:
			fix = fmt.Sprintf("its GPUs have no type in Slurm: remove slurm.gpu_types, or choose a partition with %s GPUs", need.typ)
		}
		add(LevelProblem, fmt.Sprintf("%s: no node offers %s:%d%s; its nodes offer %s", p.Name, want, need.count,
			taskNote(ts, " (%s ask%s it)"), gresSummary(p)), fix)
	}
	for _, need := range later {
		if byNeed[need] != nil || offered(func(n NodeInfo) bool { return gpusOf(n, need.typ) >= need.count }) > 0 {
			continue // told above, or offered
		}
		add(LevelProblem, fmt.Sprintf("%s: no node offers gpu:%s:%d, which %s after running out of GPU memory on a smaller type (slurm.gpu_types); its nodes offer %s",
			p.Name, need.typ, need.count, taskNote(byLater[need], "%s ask%s"), gresSummary(p)),
			fmt.Sprintf("remove %s from slurm.gpu_types, or choose a partition with %s GPUs", need.typ, need.typ))
	}
	if cpuAsk > 0 {
		if most := maxNode(p, func(n NodeInfo) int64 { return int64(n.CPUs) }); int64(cpuAsk) > most {
			add(LevelProblem, fmt.Sprintf("%s: %s %d CPUs per task, and its largest node has %d: the job would wait for ever (PartitionConfig)",
				p.Name, taskNote(maxCPU, "%s ask%s"), cpuAsk, most), "lower slurm.cpus_per_task or resources.cpus, or choose a partition with larger nodes")
		}
	}
	if memAsk > 0 {
		if most := maxNode(p, func(n NodeInfo) int64 { return n.MemoryMB }); most > 0 && memAsk > most {
			add(LevelProblem, fmt.Sprintf("%s: %s %d MB of memory, and its largest node has %d MB: sbatch refuses it",
				p.Name, taskNote(maxMem, "%s ask%s"), memAsk, most), "lower slurm.mem or resources.memory_mib_host, or choose a partition with larger nodes")
		}
	}
	for _, f := range features {
		if offered(func(n NodeInfo) bool { return slices.Contains(n.Features, f) }) == 0 {
			var all []string
			for _, n := range p.Nodes {
				for _, x := range n.Features {
					if !slices.Contains(all, x) {
						all = append(all, x)
					}
				}
			}
			add(LevelProblem, fmt.Sprintf("%s: no node has the feature %q%s (features here: %s): sbatch refuses it",
				p.Name, f, taskNote(byFeature[f], " that %s ask%s for"), listOr(all, "none")), "change slurm.constraint, or choose a partition whose nodes have it")
		}
	}
	if len(overTime) > 0 {
		add(LevelProblem, fmt.Sprintf("%s: its time limit is %s, and %s longer (timeout plus kill grace): sbatch refuses it, or it waits for ever",
			p.Name, p.TimeLimit, taskNote(overTime, "%s ask%s")), "shorten the timeouts, or choose a partition with a longer time limit")
	}
	return fs
}

// featureWord is a constraint that names one feature; others (a|b,
// a&b, counts) are left to sbatch.
var featureWord = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// gpusOf is how many GPUs (of typ, or of any type when typ is "") node n
// has.
func gpusOf(n NodeInfo, typ string) int {
	total := 0
	for _, g := range n.Gres {
		if g.Name == "gpu" && (typ == "" || g.Type == typ) {
			total += g.Count
		}
	}
	return total
}

// gpuTypes are the GPU types the nodes of p have, sorted.
func gpuTypes(p *PartitionInfo) []string {
	var ts []string
	for _, n := range p.Nodes {
		for _, g := range n.Gres {
			if g.Name == "gpu" && g.Type != "" && !slices.Contains(ts, g.Type) {
				ts = append(ts, g.Type)
			}
		}
	}
	slices.Sort(ts)
	return ts
}

// gresSummary is the GPUs of p's nodes, for a message: "gpu:v100:2 (3
// nodes), none (1 node)".
func gresSummary(p *PartitionInfo) string {
	count := map[string]int{}
	for _, n := range p.Nodes {
		var gs []string
		for _, g := range n.Gres {
			if g.Name == "gpu" {
				gs = append(gs, g.String())
			}
		}
		count[listOr(gs, "no GPU")]++
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		out = append(out, fmt.Sprintf("%s (%s)", k, plural(count[k], "node")))
	}
	return listOr(out, "nothing (no nodes)")
}

func maxNode(p *PartitionInfo, f func(NodeInfo) int64) int64 {
	var m int64
	for _, n := range p.Nodes {
		m = max(m, f(n))
	}
	return m
}

// memMB reads sbatch's --mem ("16G", "500", "2T"; MB by default) in MB; 0
// for none.
func memMB(s string) int64 {
	if s == "" {
		return 0
	}
	n := leadingInt(s)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		return (n + 1023) / 1024
	case "G":
		return n * 1024
	case "T":
		return n * 1024 * 1024
	}
	return n
}

// taskNote formats the tasks ts into format, with %s for taskList and
// %s for a verb's "s" ("task train asks", "tasks train and eval ask");
// "" for no tasks.
func taskNote(ts []CheckTask, format string) string {
	if len(ts) == 0 {
		return ""
	}
	s := ""
	if len(ts) == 1 {
		s = "s"
	}
	return fmt.Sprintf(format, taskList(ts), s)
}

// taskList names ts: "task train", "tasks a, b and c", "tasks a, b, c
// and 4 more".
func taskList(ts []CheckTask) string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	switch {
	case len(ids) == 0:
		return "no task"
	case len(ids) == 1:
		return "task " + ids[0]
	case len(ids) <= 4:
		return "tasks " + strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
	}
	return fmt.Sprintf("tasks %s and %d more", strings.Join(ids[:3], ", "), len(ids)-3)
}

func span(v []int64) string {
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}
